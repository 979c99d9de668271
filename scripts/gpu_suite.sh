#!/usr/bin/env bash
# The GPU suite, for whoever changes GPU code (DESIGN.md "Testing"): builds with the cuda preset for the
# local GPU, runs the `gpu`-labelled tests, optionally under compute-sanitizer with the allocator's cache
# bypassed, and the benchmarks. Logs and results go to OUT (default build/gpu-suite).
#   scripts/gpu_suite.sh [--no-build] [--no-tests] [--sanitize] [--bench] [--models] [--tests REGEX]
# The unit tests run one executable per process (several at once); the GPU conformance cases run in one
# process after the oracle (as ctest entries, one process per case, they take minutes longer).
# --bench: the CUDA micro-benchmarks, the CUDA graph benchmarks and, where FASHION_MNIST names the
# Fashion-MNIST directory, the bf16-autocast accuracy row. --models: the model benchmarks
# (bench/run_models.py: GPT-2 124M, ResNet-50, MLP, attention, with torch.compile and the loss parity).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu-suite}
mkdir -p "$OUT"
export OUT
build=1 tests=1 sanitize=0 bench=0 models=0 filter=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0 ;;
    --no-tests) tests=0 ;;
    --sanitize) sanitize=1 ;;
    --bench) bench=1 ;;
    --models) models=1 ;;
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
if [ $tests = 1 ]; then
  echo "==> gpu tests"
  : > "$OUT/gpu-tests.log"
  run_exe() {  # one unit-test executable; its summary line
    local log="$OUT/$(basename "$1").log"
    timeout "${TEST_TIMEOUT:-900}" "$1" > "$log" 2>&1
    local r=$?
    echo "$(basename "$1"): rc $r $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test' "$log" | tr '\n' ' ')"
  }
  export -f run_exe
  export OUT
  find build/tests -maxdepth 1 -name 'test_cuda_*' -type f -executable | sort | grep -E "${filter:-.}" \
    | xargs -r -P "${TEST_JOBS:-6}" -I{} bash -c 'run_exe {}' >> "$OUT/gpu-tests.log"
  cat "$OUT/gpu-tests.log"
  grep -q "rc [1-9]" "$OUT/gpu-tests.log" && rc=1
  # Tests of other labels that also use the GPU where one is found (the models' GPU cases, the train command).
  ctest --test-dir build -L "models|apps" ${filter:+-R "$filter"} -j 4 --timeout 900 > "$OUT/models-tests.log" 2>&1 || rc=1
  grep -E "tests passed|tests failed" "$OUT/models-tests.log"
  if [ -z "$filter" ] || echo conformance | grep -qE "$filter"; then
    ctest --test-dir build -R conformance.oracle > "$OUT/conformance.log" 2>&1
    TESSERA_CONFORMANCE_OUTPUTS="$PWD/build/tests/conformance/data/outputs.safetensors" \
      build/tests/conformance/test_conformance_torch --gtest_filter='ConformanceCuda*' >> "$OUT/conformance.log" 2>&1 || rc=1
    grep -E "^\[  PASSED|^\[  FAILED  \] [0-9]+ test|^\[  SKIPPED \] [0-9]+ test" "$OUT/conformance.log"
  fi
fi
if [ $sanitize = 1 ]; then
  echo "==> compute-sanitizer memcheck and racecheck (TESSERA_CUDA_ALLOC_CONF=backend:cudaMalloc)"
  # Tests past 2^31 elements are left out: under the sanitizer they would take hours. Executables run
  # SANITIZE_JOBS at a time (on SANITIZE_GPU where set: another GPU than the benchmarks'). The tools
  # load the CPUs heavily: unit tests run beside them overran a 240 s limit on a 32-core machine.
  # Under the tools single tests take minutes (CudaBinary.Arithmetic 168 s under racecheck,
  # CudaOptim.SgdTenStepsBitwiseEqualsCpu 118 s under memcheck), so each test runs in its own process
  # (SANITIZE_TIMEOUT each, default 600 s): an executable never times out as a whole, and the tests
  # spread over the CPUs. One log per tool and test; a summary line per test.
  sanitize_test() {  # tool exe test
    local log="$OUT/sanitizer/$1-$(basename "$2")-$3.log"
    env TESSERA_CUDA_ALLOC_CONF=backend:cudaMalloc ${SANITIZE_GPU:+CUDA_VISIBLE_DEVICES=$SANITIZE_GPU} \
      timeout "${SANITIZE_TIMEOUT:-600}" compute-sanitizer --tool "$1" --error-exitcode 99 "$2" \
      --gtest_filter="$3" > "$log" 2>&1
    local r=$?
    echo "$1 $(basename "$2") $3: rc $r $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1)"
  }
  export -f sanitize_test
  mkdir -p "$OUT/sanitizer"
  # "tool exe Suite.Test" lines: every test of every test_cuda_* executable but those past 2^31
  # elements (hours under the tools).
  for tool in memcheck racecheck; do
    find build/tests -maxdepth 1 -name 'test_cuda_*' -type f -executable | sort | grep -E "${filter:-.}" \
      | while read -r exe; do
          "$exe" --gtest_list_tests --gtest_filter="-*Large*:*Huge*:*Past2*:*LargeShape*" \
            | awk -v t="$tool" -v e="$exe" '/^[^ ]/ {suite = $1} /^  / {print t, e, suite $1}'
        done
  done | xargs -r -P "${SANITIZE_JOBS:-8}" -L 1 bash -c 'sanitize_test "$0" "$1" "$2"' \
    | sort | tee -a "$OUT/sanitizer-summary.txt"
  grep -q "rc [1-9]" "$OUT/sanitizer-summary.txt" && rc=1
fi
if [ $bench = 1 ]; then
  echo "==> CUDA micro-benchmarks"
  python3 bench/run_cuda_micro.py --build build > "$OUT/bench.log" 2>&1 || rc=1
  tail -40 "$OUT/bench.log"
  build/bench/bench_launch_floor >> "$OUT/bench.log" 2>&1
  echo "==> CUDA graph benchmarks"
  python3 bench/run_cuda_graph.py --build build >> "$OUT/bench.log" 2>&1 || rc=1
  if [ -n "${FASHION_MNIST:-}" ]; then
    echo "==> bf16 autocast accuracy (CNN, Fashion-MNIST)"
    python3 bench/run_amp_accuracy.py --build build --data "$FASHION_MNIST" >> "$OUT/bench.log" 2>&1 || rc=1
  fi
  cp bench/results/cuda-micro.json bench/results/amp-graphs.json "$OUT/" 2>/dev/null
fi
if [ $models = 1 ]; then
  echo "==> model benchmarks"
  python3 bench/run_models.py --build build > "$OUT/models.log" 2>&1 || rc=1
  tail -20 "$OUT/models.log"
  cp bench/results/models.json "$OUT/" 2>/dev/null
fi
exit $rc
