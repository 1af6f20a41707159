// The one place the extension's C++ meets torch: PyTorch's stable ABI
// (torch/csrc/stable, the C shims, header-only types), built against
// TORCH_TARGET_VERSION (setup.py), so one binary loads into every torch from
// that version on.  No ATen / c10 headers anywhere in csrc/.
#pragma once
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <array>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

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

// The start of the message of an allocation that failed on a GPU.
inline constexpr const char* kOutOfMemory = "tiled: CUDA out of memory";

// Row-major strides of `shape` (torch's: a dim of size 0 or 1 counts as 1).
inline std::vector<int64_t> contiguous_strides(IntArrayRef shape) {
  std::vector<int64_t> strides(shape.size());
  int64_t s = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s *= shape[d] > 1 ? shape[d] : 1;
  }
  return strides;
}

// An uninitialised contiguous tensor of `like`'s dtype (or bytes) and
// device.  Straight through the C shim (no dispatcher round trip: this is on
// every call's path).
inline Tensor empty_like_dev(IntArrayRef shape, const Tensor& like, bool bytes = false) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  const std::vector<int64_t> strides = contiguous_strides(shape);
  int32_t dtype, device_type, device_index;
  AtenTensorHandle h = like.get();
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(h, &dtype));
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(h, &device_type));
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_index(h, &device_index));
  if (bytes) dtype = aoti_torch_dtype_uint8();
  AtenTensorHandle out;
  if (device_type != aoti_torch_device_type_cuda()) {
    STABLE_TORCH_ERROR_CODE_CHECK(
        aoti_torch_empty_strided(nd, shape.data(), strides.data(), dtype, device_type, device_index, &out));
    return Tensor(out);
  }
  // On a GPU the one way this fails is the caching allocator's out of memory
  // (c10::OutOfMemoryError), which the C shim turns into an error code.  It
  // comes back as a RuntimeError starting with kOutOfMemory, which the
  // Python side (torch_tiled_gemm/ops.py) raises as torch.OutOfMemoryError
  // again; the allocator's own words follow where torch passes them on
  // (from 2.13).
  try {
    STABLE_TORCH_ERROR_CODE_CHECK(
        aoti_torch_empty_strided(nd, shape.data(), strides.data(), dtype, device_type, device_index, &out));
  } catch (const std::exception& e) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    throw std::runtime_error(std::string(kOutOfMemory) + ": could not allocate " + std::to_string(n) + " elements on cuda:" +
                             std::to_string(device_index) + " (" + e.what() + ")");
  }
  return Tensor(out);
}

// A view of t's storage with the given sizes and strides (element units,
// from t's own storage offset), through the C shim.
inline Tensor strided_view(const Tensor& t, IntArrayRef sizes, IntArrayRef strides) {
  AtenTensorHandle out;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch__reinterpret_tensor(t.get(), static_cast<int64_t>(sizes.size()),
                                                               sizes.data(), strides.data(), t.storage_offset(),
                                                               &out));
  return Tensor(out);
}

}  // namespace tiled
