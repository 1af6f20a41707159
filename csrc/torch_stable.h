// The one place the extension's C++ meets torch: PyTorch's stable ABI
// (torch/csrc/stable, the C shims, header-only types), built against
// TORCH_TARGET_VERSION (setup.py), so one binary loads into every torch from
// that version on.  No ATen / c10 headers anywhere in csrc/.
#pragma once
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <array>
#include <initializer_list>

namespace tiled {

using Tensor = torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;
using Device = torch::stable::Device;
using DeviceType = torch::headeronly::DeviceType;
using IntArrayRef = torch::headeronly::IntHeaderOnlyArrayRef;

// Any op through the dispatcher, by name: `overload` "" is the default
// overload.  The arguments are the schema's, all of them, in order; the first
// return comes back.  For the few aten ops the stable headers do not wrap.
template <class... Args>
Tensor call_op(const char* name, const char* overload, const Args&... args) {
  std::array<StableIValue, sizeof...(Args) == 0 ? 1 : sizeof...(Args)> stack{torch::stable::detail::from(args)...};
  STABLE_TORCH_ERROR_CODE_CHECK(torch_call_dispatcher(name, overload, stack.data(), TORCH_ABI_VERSION));
  return torch::stable::detail::to<Tensor>(stack[0]);
}

// An uninitialised contiguous tensor of `like`'s dtype (or `dtype`) and device.
inline Tensor empty_like_dev(IntArrayRef shape, const Tensor& like, std::optional<ScalarType> dtype = std::nullopt) {
  return torch::stable::empty(shape, dtype ? dtype : std::optional<ScalarType>(like.scalar_type()), std::nullopt,
                              like.device());
}

}  // namespace tiled
