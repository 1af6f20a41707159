export PYTHONPATH=$PWD:/tmp/site TILED_COMMIT=2fa62f1 MAX_JOBS=16
if ! ls torch_tiled_gemm/_C*.so >/dev/null 2>&1; then
  python3 setup.py build_ext --inplace > /tmp/build.log 2>&1 || { grep -B3 -A8 "error" /tmp/build.log | head -60; exit 1; }
fi
timeout 120 python3 -m pytest -q -p no:cacheprovider -n 6 tests/test_edges.py tests/test_exact.py tests/test_fused.py tests/test_tune.py -rfE 2>&1 | grep -E "^(FAILED|ERROR)|passed|failed" | tail -8
cat > /tmp/sm80_cases.py <<'PY'
import torch, torch_tiled_gemm as ttg
from torch_tiled_gemm.bench import _layout as L
bad = 0
for dt in (torch.bfloat16, torch.float16, torch.float32):
    torch.backends.cuda.matmul.allow_tf32 = dt == torch.float32
    for M, N, K in ((129, 257, 200), (300, 520, 72), (64, 64, 8)):
        for lay in ("NN", "NT", "TN", "TT"):
            a = L(torch.randn(M, K, device="cuda", dtype=dt), lay[0]); b = L(torch.randn(K, N, device="cuda", dtype=dt), lay[1])
            out = torch.ops.tiled.gemm(a, b, torch.randn(N, device="cuda", dtype=dt)); n = ttg.kernel_name(a, b)
            bad += not n.startswith("sm80")
print("sm80 cases done, non-sm80 kernels:", bad)
PY
for t in racecheck memcheck; do PYTORCH_NO_CUDA_MEMORY_CACHING=1 TILED_DISABLE_KERNELS=hopper,skinny,staging timeout 100 compute-sanitizer --tool $t python3 /tmp/sm80_cases.py 2>&1 | grep -E "SUMMARY|cases done" ; done
PYTORCH_NO_CUDA_MEMORY_CACHING=1 timeout 330 compute-sanitizer --tool racecheck --error-exitcode 9 python3 benchmarks/sanitize_cases.py > $OUT/racecheck.log 2>&1; echo "racecheck rc=$?"; grep -E "SUMMARY|cases done|sanitize cases:" $OUT/racecheck.log | tail -4
