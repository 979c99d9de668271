#!/usr/bin/env bash
# The GPU suite, for whoever changes GPU code (DESIGN.md "Testing"): builds with the cuda preset for the
# local GPU, runs the `gpu`-labelled tests, optionally under compute-sanitizer with the allocator's cache
# bypassed, and the CUDA micro-benchmarks. Logs and results go to OUT (default build/gpu-suite).
#   scripts/gpu_suite.sh [--no-build] [--sanitize] [--bench] [--tests REGEX]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu-suite}
mkdir -p "$OUT"
build=1 sanitize=0 bench=0 filter=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0 ;;
    --sanitize) sanitize=1 ;;
    --bench) bench=1 ;;
    --tests) shift; filter="$1" ;;
    *) echo "gpu_suite.sh: unknown option $1"; exit 2 ;;
  esac
  shift
done
export PATH="/usr/local/cuda/bin:$PATH"
# The conformance oracle needs a PyTorch that sees the GPU: the first python3 on PATH, unless named.
export TESSERA_PYTHON=${TESSERA_PYTHON:-$(command -v python3)}
nvidia-smi -L > "$OUT/gpus.txt" 2>&1 || { echo "no GPU: nvidia-smi -L failed"; exit 1; }
arch=${TESSERA_CUDA_ARCHS:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')}
rc=0
if [ $build = 1 ]; then
  echo "==> build (cuda preset, sm_$arch)"
  { cmake --preset cuda -DCMAKE_CUDA_ARCHITECTURES="$arch" && cmake --build build -j "$(nproc)"; } > "$OUT/build.log" 2>&1 \
    || { tail -50 "$OUT/build.log"; echo "build failed"; exit 1; }
fi
echo "==> gpu tests"
ctest --test-dir build -L gpu ${filter:+-R "$filter"} -j 8 --timeout 900 --output-on-failure > "$OUT/gpu-tests.log" 2>&1 || rc=1
grep -E "tests passed|tests failed|Total Test time" "$OUT/gpu-tests.log"
grep -E "^\s+[0-9]+ - " "$OUT/gpu-tests.log" | head -60
if [ $sanitize = 1 ]; then
  echo "==> compute-sanitizer memcheck and racecheck (TESSERA_CUDA_ALLOC_CONF=backend:cudaMalloc)"
  # Tests past 2^31 elements are left out: under the sanitizer they would take hours.
  skip="-*Large*:*Huge*:*Past2*:*LargeShape*"
  for tool in memcheck racecheck; do
    for exe in build/tests/test_cuda_*; do
      [ -f "$exe" ] && [ -x "$exe" ] || continue
      TESSERA_CUDA_ALLOC_CONF=backend:cudaMalloc timeout "${SANITIZE_TIMEOUT:-300}" compute-sanitizer --tool $tool \
        --error-exitcode 99 "$exe" --gtest_filter="$skip" >> "$OUT/sanitizer-$tool.log" 2>&1
      echo "$tool $(basename "$exe"): rc $?" | tee -a "$OUT/sanitizer-summary.txt"
    done
  done
fi
if [ $bench = 1 ] && [ -f bench/run_cuda_micro.py ]; then
  echo "==> CUDA micro-benchmarks"
  python3 bench/run_cuda_micro.py --build build > "$OUT/bench.log" 2>&1 || rc=1
  tail -40 "$OUT/bench.log"
  cp bench/results/cuda-micro.json "$OUT/" 2>/dev/null
fi
exit $rc
