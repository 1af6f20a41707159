// Error messages built without iostreams.
//
// An ostream-formatted message once crashed the process instead of raising
// (GCC 13 with the Ubuntu Python's -Bsymbolic-functions link: the library
// had its own copy of ostream's number formatting).  Every message here is
// therefore assembled into a std::string first (std::to_string, no streams)
// and handed to STD_TORCH_CHECK as a single string.  It reaches Python as a
// RuntimeError, like TORCH_CHECK's.
#pragma once
#include <string>
#include <type_traits>

#include "torch_stable.h"

namespace tiled {
namespace msg {

inline void put(std::string& s, const char* v) { s += v; }
inline void put(std::string& s, const std::string& v) { s += v; }
inline void put(std::string& s, ScalarType v) { s += torch::headeronly::toString(v); }
inline void put(std::string& s, const Device& v) {
  s += v.type() == DeviceType::CUDA ? "cuda" : v.type() == DeviceType::CPU ? "cpu" : "device";
  if (v.has_index()) s += ":" + std::to_string(static_cast<int>(v.index()));
}
template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
inline void put(std::string& s, T v) { s += std::to_string(v); }
// Shapes as aten prints them in matmul errors: 3x2, 2x3x4.
inline void put(std::string& s, IntArrayRef v) {
  if (v.empty()) s += "scalar";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "x" : "") + std::to_string(v[i]);
}
inline void put(std::string& s, const std::vector<int64_t>& v) { put(s, IntArrayRef(v)); }

template <typename... Args>
std::string cat(const Args&... args) {
  std::string s;
  (put(s, args), ...);
  return s;
}

}  // namespace msg
}  // namespace tiled

// A check with a stream-free message; arguments are only evaluated on
// failure.
#define TILED_CHECK(cond, ...)                                                   \
  do {                                                                           \
    if (!(cond)) throw std::runtime_error(::tiled::msg::cat(__VA_ARGS__));       \
  } while (0)
