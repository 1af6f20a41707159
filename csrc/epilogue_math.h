// The epilogue's elementwise math, shared by the CPU and CUDA kernels (the
// formulas are torch's, so a fused result differs from the unfused torch
// chain only by where the rounding to a 16-bit type happens: once, after the
// whole epilogue, instead of after each op).
//
//   relu       x < 0 ? 0 : x                         (NaN stays NaN)
//   gelu_erf   x/2 * (1 + erf(x / sqrt(2)))           F.gelu(x)
//   gelu_tanh  x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3)))
//                                                     F.gelu(x, approximate="tanh")
//   silu       x / (1 + exp(-x))                      F.silu(x)
//
// Torch-free; host and device.
#pragma once
#include <math.h>

#include "gemm_problem.h"

namespace tiled {

namespace epi_detail {
TILED_HOST_DEVICE float erf_(float x) { return ::erff(x); }
TILED_HOST_DEVICE double erf_(double x) { return ::erf(x); }
TILED_HOST_DEVICE float tanh_(float x) { return ::tanhf(x); }
TILED_HOST_DEVICE double tanh_(double x) { return ::tanh(x); }
TILED_HOST_DEVICE float exp_(float x) { return ::expf(x); }
TILED_HOST_DEVICE double exp_(double x) { return ::exp(x); }
}  // namespace epi_detail

template <Activation kAct, class F>
TILED_HOST_DEVICE F activate_as(F x) {
  if constexpr (kAct == Activation::relu) {
    return x < F(0) ? F(0) : x;
  } else if constexpr (kAct == Activation::gelu_erf) {
    return F(0.5) * x * (F(1) + epi_detail::erf_(x * F(0.70710678118654752440)));
  } else if constexpr (kAct == Activation::gelu_tanh) {
    const F inner = F(0.79788456080286535588) * (x + F(0.044715) * x * x * x);
    return F(0.5) * x * (F(1) + epi_detail::tanh_(inner));
  } else if constexpr (kAct == Activation::silu) {
    return x / (F(1) + epi_detail::exp_(-x));
  } else {
    return x;
  }
}

// The same with the activation chosen at run time.
template <class F>
TILED_HOST_DEVICE F activate(F x, Activation a) {
  switch (a) {
    case Activation::relu: return activate_as<Activation::relu>(x);
    case Activation::gelu_erf: return activate_as<Activation::gelu_erf>(x);
    case Activation::gelu_tanh: return activate_as<Activation::gelu_tanh>(x);
    case Activation::silu: return activate_as<Activation::silu>(x);
    default: return x;
  }
}

// d act(x) / dx, as torch's backward ops compute it (threshold_backward,
// gelu_backward, silu_backward): the gated MLP's backward (gated_backward).
template <Activation kAct, class F>
TILED_HOST_DEVICE F activate_grad_as(F x) {
  if constexpr (kAct == Activation::relu) {
    return x <= F(0) ? F(0) : F(1);  // (a NaN passes the gradient, as threshold_backward does)
  } else if constexpr (kAct == Activation::gelu_erf) {
    const F cdf = F(0.5) * (F(1) + epi_detail::erf_(x * F(0.70710678118654752440)));
    return cdf + x * F(0.39894228040143267794) * epi_detail::exp_(F(-0.5) * x * x);
  } else if constexpr (kAct == Activation::gelu_tanh) {
    const F kBeta = F(0.79788456080286535588), kKappa = F(0.044715);
    const F t = epi_detail::tanh_(kBeta * (x + kKappa * x * x * x));
    return F(0.5) * (F(1) + t) + F(0.5) * x * (F(1) - t * t) * kBeta * (F(1) + F(3) * kKappa * x * x);
  } else if constexpr (kAct == Activation::silu) {
    const F s = F(1) / (F(1) + epi_detail::exp_(-x));
    return s * (F(1) + x * (F(1) - s));
  } else {
    return F(1);
  }
}

// Names as the ops spell them ("none", "relu", "gelu_erf", "gelu_tanh",
// "silu"); -1 for an unknown name.
inline int activation_from_name(const char* s) {
  const char* names[] = {"none", "relu", "gelu_erf", "gelu_tanh", "silu"};
  for (int i = 0; i < 5; ++i) {
    const char* a = names[i];
    const char* b = s;
    while (*a && *a == *b) ++a, ++b;
    if (*a == 0 && *b == 0) return i;
  }
  return -1;
}

}  // namespace tiled
