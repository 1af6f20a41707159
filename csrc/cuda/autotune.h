// Opt-in autotuning of the kernel choice, persisted to a file.
//
// Off unless TILED_AUTOTUNE_CACHE names a file.  Then the first GEMM of each
// problem class — (GPU name, dtype, TF32 allowed, layout, M/N/K rounded up
// to powers of two, batched or not) — times every candidate configuration for its
// class on the calling stream, keeps the fastest, appends it to the file, and
// every later GEMM of the class runs it; a later process reads the file
// back.  A candidate is a configuration by name (settings.h, docs/
// dispatch.md), e.g. sm90_bf16_128x128pp_nt or skinny_bf16_16x128sk4c_nt:
// what TILED_CONFIG would force.
// Nothing is tuned while the stream is being captured into a CUDA graph (the
// class then runs the automatic choice until an eager call tunes it), and
// the output always comes from one run of the chosen configuration, so results are
// as deterministic as without tuning.
//
// File format: one line per class, "<key>\t<configuration>\t<microseconds>"
// ("-": the rules' own choice); '#' starts a comment; for a key seen twice
// the last line wins; lines that do not parse, and lines of the older
// format (switches, NAME=value), are ignored.  Torch-free, host only.
//
// The dispatch table: the same format, measured offline on the corpus of
// model GEMMs by `python -m torch_tiled_gemm.tune` (its third column says
// what the entry gained there) and shipped in the package as
// torch_tiled_gemm/tables/<GPU name with non-alphanumerics as '-'>.tsv, next
// to the extension's shared library, its lines with a fourth field (Entry
// below).  A class with an entry runs its configuration wherever that can
// take the problem and the rules would run one of the kernels the entry was
// measured against; elsewhere, and in a class without one, the families'
// rules run (dispatch.cu, hopper.cu).  A configuration forced
// by hand (TILED_CONFIG) comes first, then a user's autotuning cache, where
// on.
#pragma once
#include <string>
#include <vector>

#include "../gemm_problem.h"
#include "dispatch.h"
#include "hopper/hopper.h"
#include "settings.h"

namespace tiled {
namespace cuda {
namespace autotune {

// The cache file, or nullptr when autotuning is off (read on every call).
const char* cache_path();

// The problem's class, as written in the file.
std::string class_key(const GemmProblem& p, const DeviceInfo& dev);

// The configurations worth timing for `p`, by full name (the first is
// always the rules' choice, the empty name).  A single entry means there is
// nothing to tune.  Some may not run `p` as named on a given device (they
// are declined there, the rules' choice runs): the tuner times each kernel
// once.
std::vector<Settings> candidates(const GemmProblem& p);
// The same on `dev`: only those that run `p` as named, each kernel once,
// none that is the rules' own choice (dispatch.cu).
std::vector<Settings> candidates(const GemmProblem& p, const DeviceInfo& dev);

// The stored choice for `key` in the file at `path` (loaded on first use, and
// again when the path changes); false if there is none.
bool lookup(const char* path, const std::string& key, Settings* out);

// Remembers a choice and appends it to the file (best effort: a file that
// cannot be written leaves the choice in memory only), unless the class
// already has one (another thread tuned it first); returns the class's
// configuration.
Settings store(const char* path, const std::string& key, const Settings& s, double microseconds);

// A line of the cache or the table: the configuration, and for a table
// line the rules' choices (kernel names) it was measured against, from its
// optional fourth field "over NAME[,NAME...]" (dispatch.cu applies such an
// entry only where the rules would run one of them).
struct Entry {
  Settings settings;
  std::vector<std::string> over;
};

// The shipped table's entry for `p`'s class on `dev` (the table for the
// GPU's name, loaded on first use); false where it has none.
bool table_lookup(const GemmProblem& p, const DeviceInfo& dev, Entry* out);

// The table file for a GPU name, e.g. ".../torch_tiled_gemm/tables/NVIDIA-H100-80GB-HBM3.tsv".
std::string table_path(const char* gpu_name);

}  // namespace autotune
}  // namespace cuda
}  // namespace tiled
