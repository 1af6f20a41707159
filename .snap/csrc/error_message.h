// Error messages built without iostreams.
//
// TORCH_CHECK formats its arguments with std::ostringstream inside this
// library.  On one toolchain we ship to (GCC 13 with the Ubuntu Python's
// -Bsymbolic-functions link), the library ended up with its own copy of
// ostream's number formatting, and formatting any integer into an error
// message crashed the process instead of raising.  Every message here is
// therefore assembled into a std::string first (std::to_string, no streams)
// and handed to TORCH_CHECK as a single string, which c10 passes through
// without a stream.
#pragma once
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>
#include <c10/core/SymInt.h>
#include <c10/util/ArrayRef.h>

#include <string>
#include <type_traits>

namespace tiled {
namespace msg {

inline void put(std::string& s, const char* v) { s += v; }
inline void put(std::string& s, const std::string& v) { s += v; }
inline void put(std::string& s, c10::ScalarType v) { s += c10::toString(v); }
inline void put(std::string& s, const c10::Device& v) { s += v.str(); }
inline void put(std::string& s, const c10::SymInt& v) {
  auto i = v.maybe_as_int();
  s += i ? std::to_string(*i) : std::string("<symbolic>");
}
template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>
inline void put(std::string& s, T v) { s += std::to_string(v); }
// Shapes as aten prints them in matmul errors: 3x2, 2x3x4.
inline void put(std::string& s, c10::IntArrayRef v) {
  if (v.empty()) s += "scalar";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "x" : "") + std::to_string(v[i]);
}
inline void put(std::string& s, c10::SymIntArrayRef v) {
  if (v.empty()) s += "scalar";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) s += "x";
    put(s, v[i]);
  }
}

template <typename... Args>
std::string cat(const Args&... args) {
  std::string s;
  (put(s, args), ...);
  return s;
}

}  // namespace msg
}  // namespace tiled

// TORCH_CHECK with a stream-free message; arguments are only evaluated on
// failure.
#define TILED_CHECK(cond, ...) TORCH_CHECK((cond), ::tiled::msg::cat(__VA_ARGS__))
#define TILED_SYM_CHECK(cond, ...) TORCH_SYM_CHECK((cond), ::tiled::msg::cat(__VA_ARGS__))
