#!/usr/bin/env bash
# Builds ./ab: the strict-fp32 large config compiled four ways, linked with
# cuBLAS for the reference.  VARIANTS (four of name:ptxas-level:order:BK:stages)
# default to ptxas -O3 / -O1 x FFMA order cols / quads at BK 16, 3 stages.
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
VARIANTS=${VARIANTS:-"o3cols:3:cols:16:3 o1cols:1:cols:16:3 o3quads:3:quads:16:3 o1quads:1:quads:16:3"}
i=0
for v in $VARIANTS; do
  IFS=: read -r name lvl order bk stages <<<"$v"
  nvcc $F -Xptxas -O$lvl -Dladder=l_v$i -DFMA_ORDER=$order -DAB_BK=$bk -DAB_STAGES=$stages "-DVNAME=\"$name\"" \
    -c kern.cu -o /tmp/ptxas_ab_v$i.o &
  i=$((i + 1))
done
[ $i -eq 4 ] || { echo "VARIANTS: four, got $i"; exit 1; }
nvcc $F -I"$inc" -c main.cu -o /tmp/ptxas_ab_main.o &
wait
nvcc -arch=${ARCH:-sm_90a} /tmp/ptxas_ab_main.o /tmp/ptxas_ab_v?.o -L"$lib" -l:libcublas.so.13 -Xlinker -rpath="$lib" -o ab
echo "built $(pwd)/ab: $VARIANTS"
