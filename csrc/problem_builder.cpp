#include "problem_builder.h"

#include "epilogue_math.h"
#include "error_message.h"


namespace tiled {

namespace {

c10::IntArrayRef shape_str(const at::Tensor& t) { return t.sizes(); }

bool supported(at::ScalarType t) {
  return t == at::kFloat || t == at::kDouble || t == at::kHalf || t == at::kBFloat16;
}

// Strides for the two matrix dims of `t` (rows = dim -2, cols = dim -1),
// normalised so a kernel can read the layout off them: a dim of size <= 1
// gets the stride that makes the operand look row-major if possible.
// Returns false when neither matrix dim is unit-stride (caller copies).
bool matrix_strides(const at::Tensor& t, int64_t& row_stride, int64_t& col_stride) {
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

Operand make_operand(const at::Tensor& t, at::Tensor& storage) {
  Operand op;
  int64_t rs, cs;
  storage = t;
  if (!matrix_strides(t, rs, cs)) {
    storage = t.contiguous();
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
void epilogue_operand(const at::Tensor& t, bool fold, at::Tensor& storage, const void*& ptr, int64_t& batch_stride,
                      int64_t& row_stride) {
  const int64_t M = t.size(-2), N = t.size(-1);
  const bool unit_col = N <= 1 || t.stride(-1) == 1;
  const bool rows_even = !fold || M <= 1 || t.stride(0) == M * t.stride(-2);
  storage = unit_col && rows_even ? t : t.contiguous();
  ptr = storage.data_ptr();
  if (fold) {  // [batch, M, N] read as [batch * M, N]
    row_stride = M > 1 ? storage.stride(1) : storage.stride(0);
    batch_stride = 0;
  } else {
    row_stride = M > 1 ? storage.stride(-2) : std::max<int64_t>(N, 1);
    batch_stride = storage.dim() == 3 && storage.size(0) > 1 ? storage.stride(0) : 0;
  }
}

}  // namespace

Activation parse_activation(c10::string_view name, const char* op_name) {
  const int a = activation_from_name(std::string(name).c_str());
  TILED_CHECK(a >= 0, op_name, ": unknown activation '", std::string(name),
              "' (choose one of: none, relu, gelu_erf, gelu_tanh, silu)");
  return static_cast<Activation>(a);
}

at::Tensor activation_torch(const at::Tensor& x, Activation act) {
  switch (act) {
    case Activation::relu: return at::relu(x);
    case Activation::gelu_erf: return at::gelu(x);
    case Activation::gelu_tanh: return at::gelu(x, "tanh");
    case Activation::silu: return at::silu(x);
    default: return x;
  }
}

DType to_dtype(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return DType::f32;
    case at::kDouble: return DType::f64;
    case at::kHalf: return DType::f16;
    case at::kBFloat16: return DType::bf16;
    default: TILED_CHECK(false, "tiled.gemm: unsupported dtype ", t);
  }
}

void check_bias(const std::optional<at::Tensor>& bias, const c10::SymInt& N, const at::Tensor& like,
                const char* op_name) {
  if (!bias.has_value()) return;
  const auto& c = *bias;
  // SymInt comparison: under torch.compile this runs on symbolic sizes.
  TILED_SYM_CHECK(c.dim() == 1 ? c.sym_size(0).sym_eq(N) : c10::SymBool(false), op_name,
                  ": bias must be 1-D of size N=", N, ", got shape ", c.sym_sizes());
  TILED_CHECK(c.scalar_type() == like.scalar_type(), op_name, ": bias dtype ", c.scalar_type(),
              " differs from the operands' dtype ", like.scalar_type());
  TILED_CHECK(c.device() == like.device(), op_name, ": bias is on ", c.device(), " but the operands are on ",
              like.device());
}

std::vector<int64_t> check_gemm_args(const at::Tensor& a, const at::Tensor& b,
                                     const std::optional<at::Tensor>& bias,
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
  TILED_CHECK(a.layout() == at::kStrided && b.layout() == at::kStrided, op_name,
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

PreparedGemm prepare_gemm(const at::Tensor& a_in, const at::Tensor& b_in,
                          const std::optional<at::Tensor>& bias, const char* op_name,
                          const EpilogueArgs* epi) {
  PreparedGemm r;
  const auto shape = check_gemm_args(a_in, b_in, bias, op_name);
  const EpilogueArgs none;
  const EpilogueArgs& e = epi ? *epi : none;
  // Checked before any early return, so every shape rejects the same inputs.
  for (const auto* t : {&e.mul, &e.residual}) {
    if (!t->has_value()) continue;
    const char* what = t == &e.mul ? "mul" : "residual";
    TILED_CHECK((*t)->sizes().vec() == shape, op_name, ": ", what, " must have the output's shape ",
                c10::IntArrayRef(shape), ", got ", (*t)->sizes());
    TILED_CHECK((*t)->scalar_type() == a_in.scalar_type(), op_name, ": ", what, " dtype ", (*t)->scalar_type(),
                " differs from the operands' dtype ", a_in.scalar_type());
    TILED_CHECK((*t)->device() == a_in.device(), op_name, ": ", what, " is on ", (*t)->device(),
                " but the operands are on ", a_in.device());
  }
  r.out = at::empty(shape, a_in.options().memory_format(at::MemoryFormat::Contiguous));
  if (e.save_pre) r.pre = at::empty(shape, a_in.options().memory_format(at::MemoryFormat::Contiguous));
  const int64_t M = a_in.size(-2), K = a_in.size(-1), N = b_in.size(-1);
  const int64_t batch = shape.size() == 3 ? shape[0] : 1;
  if (r.out.numel() == 0) {
    r.done = true;
    return r;
  }
  if (K == 0) {
    if (bias.has_value()) r.out.copy_(bias->expand_as(r.out));
    else r.out.zero_();
    if (e.save_pre) r.pre.copy_(r.out);
    if (e.act != Activation::none) r.out.copy_(activation_torch(r.out, e.act));
    if (e.mul.has_value()) r.out.mul_(*e.mul);
    if (e.residual.has_value()) r.out.add_(*e.residual);
    r.done = true;
    return r;
  }

  at::Tensor a = a_in, b = b_in;
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
    const int64_t row_stride = M == 1 ? a.stride(0) : a.stride(1);
    a = a.as_strided({batch * M, K}, {row_stride, 1});
    p.M = batch * M;
    p.batch = 1;
  }
  p.a = make_operand(a, r.a_storage);
  p.b = make_operand(b, r.b_storage);
  if (bias.has_value()) {
    r.bias_storage = bias->contiguous();
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

}  // namespace tiled
