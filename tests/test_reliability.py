"""benchmarks/reliability.py's bookkeeping (CPU): its pieces run side by side
within their time limits, and initcheck's reports are told apart."""
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))

import reliability  # noqa: E402


def test_jobs_side_by_side_and_time_limit(tmp_path):
    jobs = [reliability.Job(i, ["sleep", str(s)], str(tmp_path / f"{i}.log"), lambda rc: rc, timeout=t)
            for i, (s, t) in enumerate([(0.5, None), (30, 5), (0.1, None), (0.5, None)])]
    done = {}
    t0 = time.time()
    reliability.run_jobs(jobs, 2, lambda job, value: done.setdefault(job.key, (value, time.time() - t0)))
    assert {k: v for k, (v, _) in done.items()} == {0: 0, 1: None, 2: 0, 3: 0}  # None: killed at its limit
    assert done[1][1] < 8  # killed, not waited for
    assert list(done) == [0, 2, 3, 1]  # the others ran beside the slow one, in the slot it left
    assert "timed out after 5 s" in open(tmp_path / "1.log").read()


INITCHECK_LOG = """========= COMPUTE-SANITIZER
sanitize cases: 25 seen
========= Uninitialized __global__ memory read of size 4 bytes
=========     at void tiled::sm90::gemm_kernel<(int)128>(Params)+0x380
=========     by thread (96,0,0) in block (8,0,0)
=========
========= Uninitialized __global__ memory read of size 4 bytes
=========     at void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda>(int)+0x380
=========     by thread (1,0,0) in block (0,0,0)
=========
========= Host API memory access error at host access to 0x7f6ee8871000 of size 240,000 bytes
=========     Uninitialized access to 0x7f6ee88a2e20 on access by cudaMemcpy source
=========
========= Host API memory access error at host access to 0x7f6ee8871000 of size 240,000 bytes
=========     Uninitialized access to 0x7f6ee88a2e80 on access by cudaMemcpy source
=========
sanitize cases done, 0 numerical failures
========= ERROR SUMMARY: {total} errors
"""


def test_initcheck_counts_our_kernels_apart(tmp_path):
    job = reliability.sanitizer_job(str(tmp_path), "initcheck", "0/4")
    assert job.key == ("initcheck", "0/4") and "--show-backtrace" in job.cmd and job.cmd[-2:] == ["--part", "0/4"]
    with open(job.log, "w") as f:
        f.write(INITCHECK_LOG.format(total=4))
    assert job.finish(0) == {"errors": 1, "torch_reads": 3}
    # A report the log does not show (a print limit, the device buffer
    # overflowing): the count cannot be trusted.
    with open(job.log, "w") as f:
        f.write(INITCHECK_LOG.format(total=5))
    assert job.finish(0)["errors"] == -1
    sm80 = reliability.sanitizer_job(str(tmp_path), "memcheck", sm80=True)
    assert sm80.key == ("memcheck_sm80", None) and sm80.cmd[-1] == "--sm80"
    with open(sm80.log, "w") as f:
        f.write("sanitize cases done, 0 numerical failures\n========= ERROR SUMMARY: 0 errors\n")
    assert sm80.finish(0) == 0
