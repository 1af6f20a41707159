#include "problem_builder.h"

#include "epilogue_math.h"
#include "error_message.h"


namespace tiled {

namespace {

IntArrayRef shape_str(const Tensor& t) { return t.sizes(); }

bool supported(ScalarType t) {
  return t == ScalarType::Float || t == ScalarType::Double || t == ScalarType::Half || t == ScalarType::BFloat16;
}

// Strides for the two matrix dims of `t` (rows = dim -2, cols = dim -1),
// normalised so a kernel can read the layout off them: a dim of size <= 1
// gets the stride that makes the operand look row-major if possible.
// Returns false when neither matrix dim is unit-stride (caller copies).
bool matrix_strides(const Tensor& t, int64_t& row_stride, int64_t& col_stride) {
  const int64_t rows = t.size(-2), cols = t.size(-1);
  row_stride = t.stride(-2);
  col_stride = t.stride(-1);
  if (cols <= 1) col_stride = 1;
  if (col_stride == 1) {
    if (rows <= 1) row_stride = std::max<int64_t>(cols, 1);
    return true;
  }
  if (rows <= 1) row_stride = 1;
  return row_stride == 1;
}

Operand make_operand(const Tensor& t, Tensor& storage) {
  Operand op;
  int64_t rs, cs;
  storage = t;
  if (!matrix_strides(t, rs, cs)) {
    storage = torch::stable::contiguous(t);
    matrix_strides(storage, rs, cs);
  }
  op.ptr = storage.data_ptr();
  op.row_stride = rs;
  op.col_stride = cs;
  op.batch_stride = storage.dim() == 3 ? storage.stride(0) : 0;
  if (storage.dim() == 3 && storage.size(0) <= 1) op.batch_stride = 0;
  return op;
}

// An epilogue operand (mul / residual) as the kernels read it: the output's
// shape, a unit column stride; where the batch was folded into M, evenly
// spaced rows.  Copies only when it has neither.
void epilogue_operand(const Tensor& t, bool fold, Tensor& storage, const void*& ptr, int64_t& batch_stride,
                      int64_t& row_stride) {
  const int64_t M = t.size(-2), N = t.size(-1);
  const bool unit_col = N <= 1 || t.stride(-1) == 1;
  const bool rows_even = !fold || M <= 1 || t.stride(0) == M * t.stride(-2);
  storage = unit_col && rows_even ? t : torch::stable::contiguous(t);
  ptr = storage.data_ptr();
  if (fold) {  // [batch, M, N] read as [batch * M, N]
    row_stride = M > 1 ? storage.stride(1) : storage.stride(0);
    batch_stride = 0;
  } else {
    row_stride = M > 1 ? storage.stride(-2) : std::max<int64_t>(N, 1);
    batch_stride = storage.dim() == 3 && storage.size(0) > 1 ? storage.stride(0) : 0;
  }
}

// A batched A [batch, M, K] with unit column stride and evenly spaced rows,
// read as one [batch * M, K] matrix.
Operand folded_operand(const Tensor& a, Tensor& storage) {
  storage = a;
  Operand op;
  op.ptr = a.data_ptr();
  op.row_stride = a.size(1) == 1 ? a.stride(0) : a.stride(1);
  op.col_stride = 1;
  op.batch_stride = 0;
  return op;
}

// K == 0: the product is zero, so the output is the epilogue of zero.
void empty_k_epilogue(PreparedGemm& r, const std::optional<Tensor>& bias, const EpilogueArgs& e) {
  if (bias.has_value()) torch::stable::copy_(r.out, *bias);  // broadcast over the rows
  else torch::stable::zero_(r.out);
  if (e.save_pre) torch::stable::copy_(r.pre, r.out);
  switch (e.act) {
    case Activation::relu: call_op("aten::relu_", "", r.out); break;
    case Activation::gelu_erf: call_op("aten::gelu_", "", r.out, std::string("none")); break;
    case Activation::gelu_tanh: call_op("aten::gelu_", "", r.out, std::string("tanh")); break;
    case Activation::silu: call_op("aten::silu_", "", r.out); break;
    default: break;
  }
  if (e.mul.has_value()) call_op("aten::mul_", "Tensor", r.out, *e.mul);
  if (e.residual.has_value()) torch::stable::copy_(r.out, torch::stable::subtract(r.out, *e.residual, -1.0));
}

}  // namespace

Activation parse_activation(const std::string& name, const char* op_name) {
  const int a = activation_from_name(name.c_str());
  TILED_CHECK(a >= 0, op_name, ": unknown activation '", name,
              "' (choose one of: none, relu, gelu_erf, gelu_tanh, silu)");
  return static_cast<Activation>(a);
}

DType to_dtype(ScalarType t) {
  switch (t) {
    case ScalarType::Float: return DType::f32;
    case ScalarType::Double: return DType::f64;
    case ScalarType::Half: return DType::f16;
    case ScalarType::BFloat16: return DType::bf16;
    default: throw std::runtime_error(msg::cat("tiled.gemm: unsupported dtype ", t));
  }
}

void check_bias(const std::optional<Tensor>& bias, int64_t N, const Tensor& like, const char* op_name) {
  if (!bias.has_value()) return;
  const auto& c = *bias;
  TILED_CHECK(c.dim() == 1 && c.size(0) == N, op_name, ": bias must be 1-D of size N=", N, ", got shape ",
              c.sizes());
  TILED_CHECK(c.scalar_type() == like.scalar_type(), op_name, ": bias dtype ", c.scalar_type(),
              " differs from the operands' dtype ", like.scalar_type());
  TILED_CHECK(c.device() == like.device(), op_name, ": bias is on ", c.device(), " but the operands are on ",
              like.device());
}

std::vector<int64_t> check_gemm_args(const Tensor& a, const Tensor& b, const std::optional<Tensor>& bias,
                                     const char* op_name) {
  TILED_CHECK(a.dim() == 2 || a.dim() == 3, op_name, ": a must be 2-D [M, K] or 3-D [B, M, K], got ",
              a.dim(), "-D tensor of shape ", a.sizes());
  TILED_CHECK(b.dim() == 2 || b.dim() == 3, op_name, ": b must be 2-D [K, N] or 3-D [B, K, N], got ",
              b.dim(), "-D tensor of shape ", b.sizes());
  TILED_CHECK(a.size(-1) == b.size(-2), op_name, ": a and b shapes cannot be multiplied (",
              shape_str(a), " and ", shape_str(b), ")");
  TILED_CHECK(a.dim() == 2 || b.dim() == 2 || a.size(0) == b.size(0), op_name,
              ": batch sizes of a and b differ (", shape_str(a), " and ", shape_str(b), ")");
  TILED_CHECK(a.scalar_type() == b.scalar_type(), op_name,
              ": expected a and b to have the same dtype, but got: ", a.scalar_type(), " != ",
              b.scalar_type());
  TILED_CHECK(supported(a.scalar_type()), op_name, ": unsupported dtype ", a.scalar_type(),
              " (supported: float32, float64, float16, bfloat16)");
  TILED_CHECK(a.device() == b.device(), op_name,
              ": expected a and b on the same device, but got ", a.device(), " and ", b.device());
  TILED_CHECK(a.layout() == torch::headeronly::Layout::Strided && b.layout() == torch::headeronly::Layout::Strided, op_name,
              ": only strided (dense) tensors are supported");
  const int64_t N = b.size(-1);
  check_bias(bias, N, a, op_name);
  std::vector<int64_t> shape;
  if (a.dim() == 3) shape.push_back(a.size(0));
  else if (b.dim() == 3) shape.push_back(b.size(0));
  shape.push_back(a.size(-2));
  shape.push_back(N);
  return shape;
}

PreparedGemm prepare_gemm(const Tensor& a_in, const Tensor& b_in, const std::optional<Tensor>& bias,
                          const char* op_name, const EpilogueArgs* epi) {
  PreparedGemm r;
  const auto shape = check_gemm_args(a_in, b_in, bias, op_name);
  const EpilogueArgs none;
  const EpilogueArgs& e = epi ? *epi : none;
  // Checked before any early return, so every shape rejects the same inputs.
  for (const auto* t : {&e.mul, &e.residual}) {
    if (!t->has_value()) continue;
    const char* what = t == &e.mul ? "mul" : "residual";
    const IntArrayRef got = (*t)->sizes();
    TILED_CHECK(std::vector<int64_t>(got.begin(), got.end()) == shape, op_name, ": ", what,
                " must have the output's shape ", shape, ", got ", got);
    TILED_CHECK((*t)->scalar_type() == a_in.scalar_type(), op_name, ": ", what, " dtype ", (*t)->scalar_type(),
                " differs from the operands' dtype ", a_in.scalar_type());
    TILED_CHECK((*t)->device() == a_in.device(), op_name, ": ", what, " is on ", (*t)->device(),
                " but the operands are on ", a_in.device());
  }
  r.out = empty_like_dev(shape, a_in);
  if (e.save_pre) r.pre = empty_like_dev(shape, a_in);
  const int64_t M = a_in.size(-2), K = a_in.size(-1), N = b_in.size(-1);
  const int64_t batch = shape.size() == 3 ? shape[0] : 1;
  if (r.out.numel() == 0) {
    r.done = true;
    return r;
  }
  if (K == 0) {
    empty_k_epilogue(r, bias, e);
    r.done = true;
    return r;
  }

  Tensor a = a_in;
  const Tensor& b = b_in;
  GemmProblem& p = r.problem;
  p.dtype = to_dtype(a.scalar_type());
  p.batch = batch;
  p.M = M;
  p.N = N;
  p.K = K;
  // A batched row-major A against a shared 2-D B is one tall GEMM: fold the
  // batch into M when A's batches are evenly spaced rows.
  const bool fold = a.dim() == 3 && b.dim() == 2 && batch > 1 && (K == 1 || a.stride(2) == 1) &&
                    (M == 1 || a.stride(0) == M * a.stride(1));
  if (fold) {
    p.M = batch * M;
    p.batch = 1;
  }
  p.a = fold ? folded_operand(a, r.a_storage) : make_operand(a, r.a_storage);
  p.b = make_operand(b, r.b_storage);
  if (bias.has_value()) {
    r.bias_storage = bias->is_contiguous() ? *bias : torch::stable::contiguous(*bias);
    p.bias = r.bias_storage.data_ptr();
  }
  p.c = r.out.data_ptr();
  p.c_row_stride = N;
  p.c_batch_stride = (!fold && r.out.dim() == 3) ? M * N : 0;
  Epilogue& pe = p.epi;
  pe.act = e.act;
  if (e.mul.has_value())
    epilogue_operand(*e.mul, fold, r.mul_storage, pe.mul, pe.mul_batch_stride, pe.mul_row_stride);
  if (e.residual.has_value())
    epilogue_operand(*e.residual, fold, r.res_storage, pe.residual, pe.res_batch_stride, pe.res_row_stride);
  if (e.save_pre) {
    pe.pre = r.pre.data_ptr();
    pe.pre_row_stride = p.c_row_stride;
    pe.pre_batch_stride = p.c_batch_stride;
  }
  return r;
}

Tensor as_matrix(const Tensor& t) {
  const int64_t nd = t.dim();
  if (nd == 2) return t;
  int64_t rows = 1;
  for (int64_t d = 0; d + 1 < nd; ++d) rows *= t.size(d);
  const int64_t n = t.size(-1);
  // A view when the leading dims (those of size > 1) are evenly spaced rows;
  // otherwise reshape, which copies.
  int64_t row_stride = std::max<int64_t>(n, 1), next_extent = -1;
  bool view = rows > 0;
  for (int64_t d = nd - 2; d >= 0 && view; --d) {
    if (t.size(d) == 1) continue;
    if (next_extent < 0) row_stride = t.stride(d);
    else view = t.stride(d) == next_extent;
    next_extent = t.stride(d) * t.size(d);
  }
  if (!view) return torch::stable::reshape(t, {rows, n});
  return strided_view(t, {rows, n}, {row_stride, t.stride(-1)});
}

std::vector<int64_t> linear_out_shape(const Tensor& x, int64_t out_features) {
  const IntArrayRef s = x.sizes();
  std::vector<int64_t> shape(s.begin(), s.end());
  shape.back() = out_features;
  return shape;
}

void check_linear_args(const Tensor& x, const Tensor& weight, const char* op) {
  TILED_CHECK(weight.dim() == 2, op, ": weight must be 2-D [out_features, in_features], got shape ", weight.sizes());
  TILED_CHECK(x.dim() >= 1, op, ": input must be at least 1-D");
  // nn.Linear's words for an input of another dtype than the module's
  // (before the bias check, which would otherwise report the bias).
  TILED_CHECK(x.scalar_type() == weight.scalar_type(), op, ": mat1 and mat2 must have the same dtype, but got ",
              x.scalar_type(), " and ", weight.scalar_type());
  TILED_CHECK(x.size(-1) == weight.size(1), op, ": mat1 and mat2 shapes cannot be multiplied (input ", x.sizes(),
              " and weight^T ", weight.size(1), "x", weight.size(0), ")");
}

}  // namespace tiled
