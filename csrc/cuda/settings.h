// The three run-time switches and the configuration a call runs under.
//
//   TILED_CONFIG=name[,name...]   forces a configuration by name (as
//       ttg.kernel_name reports it, e.g. sm90_bf16_128x128pp_nt, or its
//       variant alone, 128x128pp; one name per family at most), wherever its
//       kernel can take the problem (docs/dispatch.md);
//   TILED_DISABLE_KERNELS=a,b     takes kernel families (hopper, skinny,
//       sm80, simt_fast), the dispatch table (table), staging copies
//       (staging) or CPU instruction sets (amx, avx512, avx2) out of the
//       choice; read once per process;
//   TILED_AUTOTUNE_CACHE=file     the run-time autotuning cache (autotune.h).
//
// The autotuner (autotune.h) times its candidates and runs the table's or its
// own choice by pushing a configuration scope on the calling thread, which
// stands in for TILED_CONFIG: one mechanism for tests, tuning and the table.
// Torch-free, host only.
#pragma once
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#if !defined(_WIN32)
extern "C" char** environ;
#endif

namespace tiled {
namespace cuda {

// A configuration chosen for a call: a name (or comma list of names) as
// TILED_CONFIG takes it; empty: the families' rules.  (The autotuning cache,
// the dispatch table and the tuner speak in these names.)
struct Settings {
  std::string config;
  bool empty() const { return config.empty(); }
};

namespace detail {
inline const Settings*& active_settings() {
  static thread_local const Settings* active = nullptr;
  return active;
}

// The TILED_* variables of the environment as one EnvSnapshot read them.
struct EnvEntry {
  const char* name;  // "TILED_X=value", the name's first character
  size_t name_len;
  const char* value;
};
struct EnvTable {
  static constexpr int kMax = 32;
  EnvEntry entries[kMax];
  int count = 0;
};
inline const EnvTable*& active_env() {
  static thread_local const EnvTable* active = nullptr;
  return active;
}
inline char** process_environment() {
#if defined(_WIN32)
  return _environ;
#else
  return environ;
#endif
}
}  // namespace detail

// Reads the environment's TILED_* variables once, for the scope of one call
// of the op: a call asks for its switches dozens of times, and getenv scans
// the whole environment each time (a 1x64x64 bf16 call on an H100 host took
// 34 us with 91 variables in the environment, 55 us with 291; 19 and 21 us
// with this snapshot; benchmarks/research/host_overhead.py).  The variables are
// still read on every call, so a change between calls takes effect.  Scopes
// nest (the outermost one's table stands); without one, setting() calls
// getenv.  Like getenv, it assumes no other thread changes the environment
// during the call.
class EnvSnapshot {
 public:
  EnvSnapshot() {
    if (detail::active_env() != nullptr || !read()) return;  // an outer one stands, or too many
    detail::active_env() = &table_;
    installed_ = true;
  }
  ~EnvSnapshot() {
    if (installed_) detail::active_env() = nullptr;
  }
  EnvSnapshot(const EnvSnapshot&) = delete;
  EnvSnapshot& operator=(const EnvSnapshot&) = delete;

 private:
  // False when the environment holds more TILED_* variables than the table
  // (then every lookup goes to getenv, as without a snapshot).
  bool read();

  detail::EnvTable table_;
  bool installed_ = false;
};

// The value of environment variable `name` (through the active EnvSnapshot,
// if any), else nullptr.
inline const char* setting(const char* name) {
  if (const detail::EnvTable* env = detail::active_env()) {
    const size_t len = std::strlen(name);
    for (int i = 0; i < env->count; ++i) {
      const detail::EnvEntry& e = env->entries[i];
      if (e.name_len == len && std::memcmp(e.name, name, len) == 0) return e.value;
    }
    return nullptr;
  }
  return std::getenv(name);
}

inline bool EnvSnapshot::read() {
  for (char** e = detail::process_environment(); e != nullptr && *e != nullptr; ++e) {
    const char* entry = *e;
    if (std::strncmp(entry, "TILED_", 6) != 0) continue;
    const char* eq = std::strchr(entry, '=');
    if (eq == nullptr) continue;
    if (table_.count == detail::EnvTable::kMax) return false;
    table_.entries[table_.count++] = {entry, static_cast<size_t>(eq - entry), eq + 1};
  }
  return true;
}

// The configuration names in force for this call: the active scope's (the
// autotuner's or the table's choice; "" for the rules'), else TILED_CONFIG;
// nullptr for none.
inline const char* forced_config() {
  if (const Settings* s = detail::active_settings()) return s->config.empty() ? nullptr : s->config.c_str();
  const char* v = setting("TILED_CONFIG");
  return v && *v ? v : nullptr;
}

// Calls f(item) for each name of the comma list `list` until f returns true;
// returns whether one did.
template <class F>
bool any_config_item(const char* list, F&& f) {
  if (list == nullptr) return false;
  const std::string text(list);
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    if (end > start && f(text.substr(start, end - start))) return true;
    start = end + 1;
  }
  return false;
}

// Whether TILED_DISABLE_KERNELS (read once per process) names `what`: a
// family (hopper, skinny, sm80, simt_fast), "table", "staging", or a CPU
// instruction set (amx, avx512, avx2).  A way to bisect a suspected kernel
// bug, or to compare against the fallback, without rebuilding.
inline bool kernel_disabled(const char* what) {
  static const std::string list = [] {
    const char* v = std::getenv("TILED_DISABLE_KERNELS");
    return std::string(",") + (v ? v : "") + ",";
  }();
  return list.find(std::string(",") + what + ",") != std::string::npos;
}

// Which operands a kernel loads under L2's evict_first policy (bit 0: A,
// bit 1: B; cp_async.cuh's l2_evict_first_policy): those read once
// (`a_once`, `b_once`: every element by one CTA).
inline int l2_stream_bits(bool a_once, bool b_once) { return (a_once ? 1 : 0) | (b_once ? 2 : 0); }

// Makes `s` the calling thread's configuration until the scope ends (scopes do
// not nest: the inner one replaces the outer one, which comes back after).
class SettingsScope {
 public:
  explicit SettingsScope(const Settings* s) : saved_(detail::active_settings()) { detail::active_settings() = s; }
  ~SettingsScope() { detail::active_settings() = saved_; }
  SettingsScope(const SettingsScope&) = delete;
  SettingsScope& operator=(const SettingsScope&) = delete;

 private:
  const Settings* saved_;
};

// A configuration as the table, the cache and the tuner write it ("-" or
// "": the rules' own choice) <-> Settings.
inline Settings parse_settings(const std::string& text) { return Settings{text == "-" ? std::string() : text}; }
inline std::string format_settings(const Settings& s) { return s.config.empty() ? "-" : s.config; }

}  // namespace cuda
}  // namespace tiled
