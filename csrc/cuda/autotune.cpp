// The autotuning cache: class keys, candidate configurations, the file.  The timing
// itself is in dispatch.cu, which owns the kernel choice.
#include "autotune.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

namespace tiled {
namespace cuda {
namespace autotune {

namespace {

int64_t pow2_at_least(int64_t v) {
  int64_t p = 1;
  while (p < v && p < (int64_t{1} << 40)) p *= 2;
  return p;
}

struct Cache {
  std::mutex mu;
  std::string path;  // the file `entries` was loaded from
  std::map<std::string, Entry> entries;
};

Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: used until exit
  return *c;
}

// The lines of the file at `path` that parse, key -> entry (a later line
// for the same key wins); empty when the file cannot be read.
std::map<std::string, Entry> read_entries(const char* path) {
  std::map<std::string, Entry> entries;
  // C stdio, not iostreams: see error_message.h on streams in this library.
  std::FILE* f = std::fopen(path, "r");
  if (!f) return entries;
  std::string line;
  char buf[1024];
  while (std::fgets(buf, sizeof(buf), f)) {
    line += buf;
    if (line.empty() || line.back() != '\n') {
      if (!std::feof(f)) continue;  // a longer line: keep reading it
    } else {
      line.pop_back();
    }
    const std::string text = line;
    line.clear();
    if (text.empty() || text[0] == '#') continue;
    const size_t t1 = text.find('\t');
    const size_t t2 = t1 == std::string::npos ? t1 : text.find('\t', t1 + 1);
    if (t1 == std::string::npos || t2 == std::string::npos || t1 == 0) continue;
    const std::string config = text.substr(t1 + 1, t2 - t1 - 1);
    // (A line of the older format, switches such as TILED_SM90_SCHEDULE=...
    // that no longer exist, is skipped: such a class is tuned again.)
    if (config.find('=') != std::string::npos) continue;
    Entry& e = entries[text.substr(0, t1)];
    e.settings = parse_settings(config);
    // A table line's fourth field, "over NAME[,NAME...]": the rules' choices
    // it was measured against.
    const size_t t3 = text.find('\t', t2 + 1);
    e.over.clear();
    if (t3 != std::string::npos && text.compare(t3 + 1, 5, "over ") == 0)
      any_config_item(text.c_str() + t3 + 6, [&](const std::string& name) {
        e.over.push_back(name);
        return false;
      });
  }
  std::fclose(f);
  return entries;
}

// Loads `path` into the cache if it is not the file loaded last (mu held).
void load_locked(Cache& c, const char* path) {
  if (c.path == path) return;
  c.path = path;
  c.entries = read_entries(path);
}

// The folder of the shared library this code is in ("" if unknown).
std::string library_dir() {
  Dl_info info;
  if (dladdr(reinterpret_cast<const void*>(&library_dir), &info) == 0 || info.dli_fname == nullptr) return "";
  const std::string so(info.dli_fname);
  const size_t slash = so.rfind('/');
  return slash == std::string::npos ? "" : so.substr(0, slash);
}

// The shipped tables, per GPU name, each read once.
struct Tables {
  std::mutex mu;
  std::map<std::string, std::map<std::string, Entry>> by_gpu;
};
Tables& tables() {
  static Tables* t = new Tables;  // never destroyed: used until exit
  return *t;
}

}  // namespace

const char* cache_path() {
  const char* v = setting("TILED_AUTOTUNE_CACHE");
  return v && v[0] != '\0' ? v : nullptr;
}

std::string class_key(const GemmProblem& p, const DeviceInfo& dev) {
  std::string gpu(dev.name);
  for (char& ch : gpu)
    if (ch == ' ' || ch == '\t' || ch == ';' || ch == '=') ch = '_';
  std::string key = "gpu=" + gpu + ";sms=" + std::to_string(dev.num_sms) + ";dtype=" + dtype_name(p.dtype);
  key += std::string(";tf32=") + (p.allow_tf32 ? "1" : "0");
  key += std::string(";layout=") + (p.a.row_major() ? "n" : "t") + (p.b.row_major() ? "n" : "t");
  key += ";m=" + std::to_string(pow2_at_least(p.M)) + ";n=" + std::to_string(pow2_at_least(p.N)) +
         ";k=" + std::to_string(pow2_at_least(p.K)) + ";batched=" + (p.batch > 1 ? "1" : "0");
  return key;
}

std::vector<Settings> candidates(const GemmProblem& p) {
  std::vector<Settings> out{Settings{}};  // the rules' choice
  const bool half = p.dtype == DType::bf16 || p.dtype == DType::f16;
  const bool tf32 = p.tf32();
  if (!half && !tf32) return out;  // strict fp32 / fp64: the rules
  const int64_t small = std::min(p.M, p.N);
  if (small <= 128) {
    // Small M or N: the skinny kernel's configurations at the block height
    // that covers the small side (in the orientation a forced one runs;
    // tf32 too).
    const int bm = small <= 16 ? 16 : small <= 32 ? 32 : 64;
    const std::string height = std::to_string(bm) + "x128sk";
    const std::string swap = p.M > 128 && p.N <= 128 ? "_swap" : "";
    // (Not the 7-stage "deep" pipeline: on the H200's tuning data it never
    // came within 2% of a GEMM's best time in 228 timings.)
    for (const std::string& n : skinny_config_list(p)) {
      const bool this_swap = n.size() > 5 && n.compare(n.size() - 5, 5, "_swap") == 0;
      if (n.find("_" + height) != std::string::npos && this_swap == !swap.empty() &&
          n.find("deep") == std::string::npos)
        out.push_back(Settings{n});
    }
  }
  // The sm90 configurations: one-slab tiles (64xW) for a small side, the
  // 128-row ones where both sides pass 64 (those that cannot run the
  // problem as named are left out where a device is known: the overload
  // below, dispatch.cu).  Few 128x64 tiles (at most 64: half a Hopper
  // GPU's SMs): the one-slab tiles as called too, whose 64-row tiles give
  // twice the CTAs or more (H100, docs/dispatch.md: 0.83 -> 0.92-1.03 at
  // K = 1024, mixed at K = 4096; for the tuner to settle per class).
  // Up to one wave of 128x128 tiles on a Hopper GPU (132 SMs): the wide
  // one-slab tiles (64x72sw ... 64x160sw) too, as hopper.cu's
  // mid_slab_width picks them.  tf32 has no one-slab tiles: its 128-row ones
  // whatever the small side (without them a tf32 GEMM with a side <= 64 had
  // no candidate but the rules' kernel, and the tuner passed it by).
  const int64_t tiles64 = ceil_div(p.M, 128) * ceil_div(p.N, 64) * p.batch;
  const bool few = tiles64 <= 64, one_wave = ceil_div(p.M, 128) * ceil_div(p.N, 128) * p.batch <= 132;
  for (const std::string& n : hopper_config_list(p)) {
    const bool slab = n.find("_64x") != std::string::npos;
    const bool as_called = n.find("sw_") == std::string::npos;
    const bool wide = slab && std::atoi(n.c_str() + n.find("_64x") + 4) > sm90::kMaxNarrowSlab;
    if (slab ? small <= 128 || (few && as_called) || (one_wave && wide) : small > 64 || tf32) out.push_back(Settings{n});
  }
  // The sm80 (mma.sync) configurations where the skinny kernel does not
  // take the problem (the tile that wins depends on the grid and K:
  // docs/sm80.md, "Configurations forced"); forced, they run on a GPU with
  // the sm90 family too, so the device overload (dispatch.cu) leaves them
  // out there.
  if (small > 64)
    for (const std::string& n : sm80_config_list(p)) out.push_back(Settings{n});
  return out;
}

bool lookup(const char* path, const std::string& key, Settings* out) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  load_locked(c, path);
  const auto it = c.entries.find(key);
  if (it == c.entries.end()) return false;
  *out = it->second.settings;
  return true;
}

Settings store(const char* path, const std::string& key, const Settings& s, double microseconds) {
  Cache& c = cache();
  std::lock_guard<std::mutex> lock(c.mu);
  load_locked(c, path);
  // First writer wins: a class's configuration never changes within a process, so a
  // workspace sized from one lookup fits the run that follows it.
  const auto it = c.entries.find(key);
  if (it != c.entries.end()) return it->second.settings;
  c.entries[key] = Entry{s, {}};
  char us[32];
  std::snprintf(us, sizeof(us), "%.2f", microseconds);
  const std::string line = key + "\t" + format_settings(s) + "\t" + us + "\n";
  if (std::FILE* f = std::fopen(path, "a")) {
    std::fputs(line.c_str(), f);
    std::fclose(f);
  }
  return s;
}

std::string table_path(const char* gpu_name) {
  std::string slug;
  for (const char* ch = gpu_name; *ch; ++ch) {
    const bool alnum = (*ch >= '0' && *ch <= '9') || (*ch >= 'a' && *ch <= 'z') || (*ch >= 'A' && *ch <= 'Z');
    if (alnum)
      slug += *ch;
    else if (!slug.empty() && slug.back() != '-')
      slug += '-';
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return library_dir() + "/tables/" + slug + ".tsv";
}

bool table_lookup(const GemmProblem& p, const DeviceInfo& dev, Entry* out) {
  Tables& t = tables();
  const std::map<std::string, Entry>* entries = nullptr;
  {
    std::lock_guard<std::mutex> lock(t.mu);
    auto it = t.by_gpu.find(dev.name);
    if (it == t.by_gpu.end()) it = t.by_gpu.emplace(dev.name, read_entries(table_path(dev.name).c_str())).first;
    entries = &it->second;  // never changes once read (std::map nodes are stable)
  }
  if (entries->empty()) return false;
  const auto e = entries->find(class_key(p, dev));
  if (e == entries->end()) return false;
  *out = e->second;
  return true;
}

}  // namespace autotune
}  // namespace cuda
}  // namespace tiled
