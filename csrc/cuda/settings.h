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

namespace tiled {
namespace cuda {

// NAME=value pairs, e.g. {{"TILED_SKINNY_MAXM", "0"}}.
using Settings = std::vector<std::pair<std::string, std::string>>;

namespace detail {
inline const Settings*& active_settings() {
  static thread_local const Settings* active = nullptr;
  return active;
}
}  // namespace detail

// The value of setting `name` for this thread: the active scope's, else the
// environment's, else nullptr.
inline const char* setting(const char* name) {
  if (const Settings* s = detail::active_settings())
    for (const auto& kv : *s)
      if (kv.first == name) return kv.second.c_str();
  return std::getenv(name);
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
