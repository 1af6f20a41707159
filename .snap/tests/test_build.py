"""The build itself: a CUDA build of torch must give a CUDA build of the extension."""
import torch

import torch_tiled_gemm  # noqa: F401


def test_cuda_kernels_compiled_in_when_torch_has_cuda():
    has = torch._C._dispatch_has_kernel_for_dispatch_key("tiled::gemm", "CUDA")
    if torch.version.cuda is not None:
        assert has, "torch is a CUDA build but the extension has no CUDA kernel (built CPU-only?)"


def test_schema():
    schema = str(torch.ops.tiled.gemm.default._schema)
    assert schema == "tiled::gemm(Tensor a, Tensor b, Tensor? bias=None) -> Tensor"
    for key in ("CPU", "Autograd", "AutocastCUDA", "AutocastCPU"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key("tiled::gemm", key), key
