// Host-only driver of the sm_90a kernel family's tile/schedule choice: reads
// "M N K batch kind" lines (kind 0 = bf16 NT, 1 = tf32 NT, 2 = tf32 NN,
// 3 = tf32 TT, 4 = bf16 TN, 5 = bf16 NN; NT: A row-major, B column-major) and prints the config name hopper_config_name picks on a
// 132-SM sm_90 device with 227 KB of opt-in shared memory, or "none".  With
// the argument --forced each line ends with a configuration name that
// TILED_CONFIG is set to for that problem ("-": unset).  The
// launchers are stubs: nothing runs on a GPU.  Built and driven by
// tests/test_choice_mirror.py to keep test_hopper.py's Python mirror of
// choose() honest on machines without a GPU.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "cuda/hopper/hopper.h"
#include "host_driver.h"

int main(int argc, char** argv) {
  const bool forced = argc > 1 && std::strcmp(argv[1], "--forced") == 0;
  char config[128];
  using namespace tiled;
  cuda::DeviceInfo dev;
  dev.sm_major = 9;
  dev.sm_minor = 0;
  dev.num_sms = 132;
  dev.max_smem_per_block_optin = 232448;
  alignas(256) static char buf[256];
  long long M, N, K, batch;
  int dt;
  while (std::scanf("%lld %lld %lld %lld %d", &M, &N, &K, &batch, &dt) == 5) {
    if (forced) {
      if (std::scanf("%127s", config) != 1) return 1;
      force_config(config);
    }
    GemmProblem p;
    p.M = M, p.N = N, p.K = K, p.batch = batch;
    p.dtype = dt == 0 || dt == 4 || dt == 5 ? DType::bf16 : DType::f32;
    p.allow_tf32 = true;
    p.a.ptr = buf, p.a.row_stride = K, p.a.col_stride = 1, p.a.batch_stride = M * K;
    p.b.ptr = buf, p.b.row_stride = 1, p.b.col_stride = K, p.b.batch_stride = N * K;
    if (dt == 2 || dt == 5) p.b.row_stride = N, p.b.col_stride = 1;  // B row-major
    if (dt == 3 || dt == 4) p.a.row_stride = 1, p.a.col_stride = M;  // A column-major
    if (dt == 4) p.b.row_stride = N, p.b.col_stride = 1;               // B row-major
    p.c = buf, p.c_row_stride = N, p.c_batch_stride = M * N;
    const char* name = cuda::hopper_config_name(p, dev);
    std::printf("%s\n", name ? name : "none");
  }
  return 0;
}
