#!/usr/bin/env bash
# Builds ./ab: the strict-fp32 large config compiled four ways (ptxas -O3 /
# -O1 x FFMA order cols / quads), linked with cuBLAS for the reference.
# Run on the GPU machine: bash benchmarks/micro/ptxas_ab/build.sh && benchmarks/micro/ptxas_ab/ab
set -e
cd "$(dirname "$0")"
csrc=../../../csrc
inc=$(dirname "$(which nvcc)")/../include
if [ ! -f "$inc/cublas_v2.h" ]; then  # cuBLAS from the pip wheels torch uses
  inc=$(python3 -c "import nvidia, os; print(os.path.join(nvidia.__path__[0], 'cu13', 'include'))")
fi
lib=$(dirname "$(find "$inc/.." "$(dirname "$(which nvcc)")/../lib64" -name 'libcublas.so*' 2>/dev/null | head -1)")
F="-O3 --expt-relaxed-constexpr -std=c++17 -arch=${ARCH:-sm_90a} -I$csrc"
build() {  # name, ptxas level, order
  nvcc $F -Xptxas -O$2 -Dladder=l_$1 -DFMA_ORDER=$3 -c kern.cu -o /tmp/ptxas_ab_$1.o &
}
build o3cols 3 cols; build o1cols 1 cols; build o3quads 3 quads; build o1quads 1 quads
nvcc $F -I"$inc" -c main.cu -o /tmp/ptxas_ab_main.o &
wait
nvcc -arch=${ARCH:-sm_90a} /tmp/ptxas_ab_main.o /tmp/ptxas_ab_o*.o -L"$lib" -l:libcublas.so.13 -Xlinker -rpath="$lib" -o ab
echo "built $(pwd)/ab"
