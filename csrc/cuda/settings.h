// Run-time settings of the kernel families (TILED_SKINNY_*, TILED_SM90_*):
// environment variables that a scope on the calling thread may override.
// The autotuner (autotune.h) times its candidates and runs its choice by
// pushing such a scope, so a candidate is exactly what the same variables set
// in the environment would select: one mechanism for A/B runs, tests and
// tuning.  Torch-free, host only.
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

// NAME=value pairs, e.g. {{"TILED_SKINNY_MAXM", "0"}}.
using Settings = std::vector<std::pair<std::string, std::string>>;

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

// The value of setting `name` for this thread: the active scope's, else the
// environment's (through the active EnvSnapshot, if any), else nullptr.
inline const char* setting(const char* name) {
  if (const Settings* s = detail::active_settings())
    for (const auto& kv : *s)
      if (kv.first == name) return kv.second.c_str();
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

// Whether the environment sets any variable whose name starts with
// `prefix` (through the active EnvSnapshot, if any).
inline bool any_setting_with_prefix(const char* prefix) {
  const size_t len = std::strlen(prefix);
  if (const detail::EnvTable* env = detail::active_env()) {
    for (int i = 0; i < env->count; ++i)
      if (env->entries[i].name_len >= len && std::strncmp(env->entries[i].name, prefix, len) == 0) return true;
    return false;
  }
  for (char** e = detail::process_environment(); e != nullptr && *e != nullptr; ++e)
    if (std::strncmp(*e, prefix, len) == 0) return true;
  return false;
}

// Setting `name` as an integer (`fallback` when unset), and whether it is
// exactly `value`.
inline long setting_long(const char* name, long fallback) {
  const char* v = setting(name);
  return v ? std::strtol(v, nullptr, 10) : fallback;
}
inline bool setting_is(const char* name, const char* value) {
  const char* v = setting(name);
  return v && std::strcmp(v, value) == 0;
}

// Which operands a kernel loads under L2's evict_first policy (bit 0: A,
// bit 1: B; cp_async.cuh's l2_evict_first_policy): by default those read
// once (`a_once`, `b_once`: every element by one CTA).  TILED_L2_STREAM=0
// turns it off; "a", "b" or "ab" force those operands (for measurements).
inline int l2_stream_bits(bool a_once, bool b_once) {
  const char* v = setting("TILED_L2_STREAM");
  if (!v) return (a_once ? 1 : 0) | (b_once ? 2 : 0);
  return (std::strchr(v, 'a') ? 1 : 0) | (std::strchr(v, 'b') ? 2 : 0);
}

// Makes `s` the calling thread's settings until the scope ends (scopes do
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

// "A=1,B=x" <-> Settings ("-" or "" is the empty set).
inline Settings parse_settings(const std::string& text) {
  Settings out;
  if (text.empty() || text == "-") return out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, end - start);
    const size_t eq = item.find('=');
    if (eq != std::string::npos && eq > 0) out.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    start = end + 1;
  }
  return out;
}
inline std::string format_settings(const Settings& s) {
  if (s.empty()) return "-";
  std::string out;
  for (const auto& kv : s) {
    if (!out.empty()) out += ',';
    out += kv.first + "=" + kv.second;
  }
  return out;
}

}  // namespace cuda
}  // namespace tiled
