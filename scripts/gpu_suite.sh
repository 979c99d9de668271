#!/usr/bin/env bash
# The GPU suite, for whoever changes GPU code (DESIGN.md "Testing"): builds with the cuda preset for the
# local GPU, runs the `gpu`-labelled tests, optionally under compute-sanitizer with the allocator's cache
# bypassed, and the benchmarks. Logs and results go to OUT (default build/gpu-suite).
#   scripts/gpu_suite.sh [--no-build] [--no-tests] [--sanitize] [--bench] [--models] [--distributed] [--libtorch]
#                        [--tests REGEX]
# The unit tests run one executable per process (several at once); the GPU conformance cases run in one
# process after the oracle (as ctest entries, one process per case, they take minutes longer).
# --bench: the CUDA micro-benchmarks and the amp-graphs suite (the CUDA graph rows and the bf16-autocast
# accuracy row, on Fashion-MNIST from FASHION_MNIST where it names the directory, else the train
# command's default). --models: the model benchmarks
# (bench/run_models.py: GPT-2 124M, ResNet-50, MLP, attention, against eager, torch.compile and max-autotune;
# the loss-curve parity rows are `bench/run_models.py --only parity`).
# --distributed: the nccl backend at world size 1, the TCPStore against torch's and torchrun; with two
# GPUs or more, the Collectives and DDP tests on 2 ranks over nccl, started by mpirun and by torchrun;
# then DDP's overhead at world size 1 (bench/run_ddp.py). NVLink multicast stays off (NCCL_NVLS_ENABLE=0).
# --libtorch: bench/libtorch built against the PyTorch wheel's libtorch, and bench/run_libtorch.py (the
# eager add, the MLP step and GPT-2's step, C++ against C++).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-build/gpu-suite}
mkdir -p "$OUT"
export OUT
build=1 tests=1 sanitize=0 bench=0 models=0 distributed=0 libtorch=0 filter=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-build) build=0 ;;
    --no-tests) tests=0 ;;
    --sanitize) sanitize=1 ;;
    --bench) bench=1 ;;
    --models) models=1 ;;
    --distributed) distributed=1 ;;
    --libtorch) libtorch=1 ;;
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
  # The random programs on the GPU: against the oracle's float64 results, and compiled against eager.
  ctest --test-dir build -R "RandomProgramsCuda|CompiledProgramsCuda" -j 4 --timeout 900 \
    > "$OUT/programs-tests.log" 2>&1 || rc=1
  grep -E "tests passed|tests failed" "$OUT/programs-tests.log"
  if [ -z "$filter" ] || echo conformance | grep -qE "$filter"; then
    ctest --test-dir build -R conformance.oracle > "$OUT/conformance.log" 2>&1
    TESSERA_CONFORMANCE_OUTPUTS="$PWD/build/tests/conformance/data/outputs.safetensors" \
      build/tests/conformance/test_conformance_torch --gtest_filter='ConformanceCuda*' >> "$OUT/conformance.log" 2>&1 || rc=1
    grep -E "^\[  PASSED|^\[  FAILED  \] [0-9]+ test|^\[  SKIPPED \] [0-9]+ test" "$OUT/conformance.log"
  fi
fi
if [ $distributed = 1 ]; then
  echo "==> distributed (nccl)"
  export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
  ctest --test-dir build -R "distributed_nccl|distributed_tcp_store" --output-on-failure > "$OUT/distributed.log" 2>&1 || rc=1
  grep -E "tests passed|tests failed|ok  |FAIL|skipped" "$OUT/distributed.log"
  ngpu=$(nvidia-smi -L | wc -l)
  if [ "$ngpu" -ge 2 ]; then
    d=build/tests/distributed
    coll="--gtest_filter=Collectives.*Every*:Collectives.*Root*:Collectives.*List*:Collectives.*Async*:Collectives.*Ring*"
    mpi="mpirun --oversubscribe -np 2 -x TESSERA_TEST_BACKEND=nccl -x NCCL_NVLS_ENABLE=0"
    torchrun="$TESSERA_PYTHON -m torch.distributed.run --no-python --nproc_per_node 2 --master_addr 127.0.0.1 --master_port 29533"
    for launch in mpi torchrun; do
      for t in "test_distributed_collectives $coll" "test_distributed_ddp"; do
        log="$OUT/nccl2-$launch-${t%% *}.log"
        if [ $launch = mpi ]; then
          OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 timeout 300 $mpi $d/$t > "$log" 2>&1
        else
          TESSERA_TEST_BACKEND=nccl timeout 300 $torchrun $d/$t > "$log" 2>&1
        fi
        r=$?
        echo "2 ranks over nccl, $launch, ${t%% *}: rc $r $(grep -E '^\[  PASSED|^\[  FAILED  \] [0-9]+ test' "$log" | tr '\n' ' ')"
        [ $r = 0 ] || rc=1
      done
    done
  else
    echo "one GPU: the 2-rank nccl runs need two (nvidia-h200-x2)"
  fi
  "$TESSERA_PYTHON" bench/run_ddp.py --python "$TESSERA_PYTHON" > "$OUT/ddp-bench.log" 2>&1 || rc=1
  tail -4 "$OUT/ddp-bench.log"
  cp bench/results/ddp-cuda.json "$OUT/" 2>/dev/null
fi
if [ $libtorch = 1 ]; then
  echo "==> libtorch column"
  "$TESSERA_PYTHON" bench/run_libtorch.py --python "$TESSERA_PYTHON" > "$OUT/libtorch-bench.log" 2>&1 || rc=1
  tail -5 "$OUT/libtorch-bench.log"
  cp bench/results/libtorch-cuda.json "$OUT/" 2>/dev/null
fi
if [ $sanitize = 1 ]; then
  echo "==> compute-sanitizer (${SANITIZE_TOOLS:-memcheck racecheck}; TESSERA_CUDA_ALLOC_CONF=backend:cudaMalloc)"
  # Tests past 2^31 elements are left out: under the tools they would take hours. Single tests take
  # minutes there (CudaNorm.EveryRowLengthAndDtype 414 s under racecheck, CudaOptim's 16-bit comparisons
  # 476 s under memcheck on an H200 with 15 at once), so each test runs in its own process and the
  # executables known to be slow start first. The tools load the CPUs heavily: run nothing beside them.
  #   SANITIZE_JOBS      tests at once (default: the CPU count less one)
  #   SANITIZE_TIMEOUT   seconds per test (default 600)
  #   SANITIZE_DEADLINE  seconds for the whole phase: a test is started only while time is left, and is
  #                      stopped at the deadline ("cut"); tests not run are listed, not counted as passed
  #   SANITIZE_TOOLS     default "memcheck racecheck"
  #   SANITIZE_GPU       CUDA_VISIBLE_DEVICES for the tools (another GPU than the benchmarks')
  # Resumable: a test with a result line in $OUT/sanitizer-summary.txt is not run again, so the same
  # command continues where a deadline stopped it (delete the file to start over).
  # Summary line: "tool exe test: rc R, S s, <the tool's summary>, <gtest's verdict>".
  export SAN_END=$(( $(date +%s) + ${SANITIZE_DEADLINE:-1000000} ))
  sanitize_test() {  # tool exe test
    local left=$(( SAN_END - $(date +%s) - 10 ))
    if [ "$left" -lt 30 ]; then echo "$1 $(basename "$2") $3: not started (deadline)" >> "$OUT/sanitizer-left.txt"; return; fi
    [ "$left" -gt "${SANITIZE_TIMEOUT:-600}" ] && left=${SANITIZE_TIMEOUT:-600}
    local log="$OUT/sanitizer/$1-$(basename "$2")-${3//\//_}.log" t0=$(date +%s)
    env TESSERA_CUDA_ALLOC_CONF=backend:cudaMalloc ${SANITIZE_GPU:+CUDA_VISIBLE_DEVICES=$SANITIZE_GPU} \
      timeout "$left" compute-sanitizer --tool "$1" --error-exitcode 99 "$2" --gtest_filter="$3" > "$log" 2>&1
    local r=$? secs=$(( $(date +%s) - t0 ))
    if [ $r = 124 ] && [ $(( SAN_END - $(date +%s) )) -lt 15 ]; then
      echo "$1 $(basename "$2") $3: cut at the deadline after ${secs} s" >> "$OUT/sanitizer-left.txt"; return
    fi
    echo "$1 $(basename "$2") $3: rc $r, $secs s, $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1 | sed 's/^=* *//')," \
      "$(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$log" | head -1)" | tee -a "$OUT/sanitizer-summary.txt"
  }
  export -f sanitize_test
  mkdir -p "$OUT/sanitizer"
  touch "$OUT/sanitizer-summary.txt"
  : > "$OUT/sanitizer-left.txt"
  slow_first="optim fused attention norm elementwise reduce foreach amp graph index loss"
  exes=$(find build/tests -maxdepth 1 -name 'test_cuda_*' -type f -executable | sort | grep -E "${filter:-.}" \
    | awk -v s="$slow_first" 'BEGIN {n = split(s, a, " "); for (i = 1; i <= n; i++) rank["test_cuda_" a[i]] = i}
        {b = $0; sub(".*/", "", b); print ((b in rank) ? rank[b] : 99), $0}' | sort -n -s -k1,1 | cut -d' ' -f2)
  # "tool exe Suite.Test" lines, less those with a result already.
  for tool in ${SANITIZE_TOOLS:-memcheck racecheck}; do
    for exe in $exes; do
      "$exe" --gtest_list_tests --gtest_filter="-*Large*:*Huge*:*Past2*:*LargeShape*:*ManyTiles*" \
        | awk -v t="$tool" -v e="$exe" '/^[^ ]/ {suite = $1} /^  / {print t, e, suite $1}'
    done
  done | awk 'FILENAME == ARGV[1] {sub(/:.*/, ""); done[$0] = 1; next}
              {b = $2; sub(".*/", "", b); if (!((($1 " " b " " $3)) in done)) print}' "$OUT/sanitizer-summary.txt" - \
    | xargs -r -P "${SANITIZE_JOBS:-$(( $(nproc) - 1 ))}" -L 1 bash -c 'sanitize_test "$0" "$1" "$2"' > /dev/null
  sort -o "$OUT/sanitizer-summary.txt" "$OUT/sanitizer-summary.txt"
  echo "sanitizer: $(wc -l < "$OUT/sanitizer-summary.txt") tests with a result, $(wc -l < "$OUT/sanitizer-left.txt") left for a later run"
  grep -v "rc 0," "$OUT/sanitizer-summary.txt"
  grep -q "rc [1-9]" "$OUT/sanitizer-summary.txt" && rc=1
  [ -s "$OUT/sanitizer-left.txt" ] && rc=1
fi
if [ $bench = 1 ]; then
  echo "==> CUDA micro-benchmarks"
  python3 bench/run_cuda_micro.py --build build > "$OUT/bench.log" 2>&1 || rc=1
  tail -40 "$OUT/bench.log"
  build/bench/bench_launch_floor >> "$OUT/bench.log" 2>&1
  echo "==> CUDA graph benchmarks and bf16 autocast accuracy (bench/run_amp_graphs.py)"
  python3 bench/run_amp_graphs.py --build build ${FASHION_MNIST:+--data "$FASHION_MNIST"} >> "$OUT/bench.log" 2>&1 || rc=1
  cp bench/results/cuda-micro.json bench/results/amp-graphs.json "$OUT/" 2>/dev/null
fi
if [ $models = 1 ]; then
  echo "==> model benchmarks"
  python3 bench/run_models.py --build build > "$OUT/models.log" 2>&1 || rc=1
  tail -20 "$OUT/models.log"
  cp bench/results/models.json "$OUT/" 2>/dev/null
fi
exit $rc
