"""torch_tiled_gemm: a hand-written tiled GEMM as a PyTorch custom operator.

    torch.ops.tiled.gemm(a, b, bias=None)   the op (CPU and CUDA, autograd,
                                            autocast, torch.compile)
    torch_tiled_gemm.gemm / matmul / linear the same with Python conveniences
    torch_tiled_gemm.TiledLinear            drop-in nn.Linear
    torch_tiled_gemm.swap_linear(model)     swap every nn.Linear in place
    torch_tiled_gemm.linear_act / gated_linear   fused epilogues (activation,
                                            residual, gated MLP products)
    torch_tiled_gemm.fuse_mlps(model)       timm / transformers MLP blocks on them
"""
from . import ops  # noqa: F401  (loads the library, registers fake kernels)
from .functional import gated_linear, gemm, kernel_name, linear, linear_act, matmul
from .nn import TiledLinear, swap_linear
from .fused import FuseReport, fuse_mlps, unfuse_mlps
from . import distributed  # noqa: F401,E402  (arms the DTensor sharding rules; lazy)

__all__ = [
    "gemm", "matmul", "linear", "linear_act", "gated_linear", "kernel_name", "TiledLinear", "swap_linear",
    "fuse_mlps", "unfuse_mlps", "FuseReport",
]
__version__ = "0.1.0"
