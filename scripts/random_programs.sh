#!/usr/bin/env bash
# Long runs of the random program tester (tests/programs), outside ctest: batches of generated programs,
# each written by tessera, run once by PyTorch (the oracle) and checked by tessera, on the CPU or the GPU.
#   scripts/random_programs.sh [--count N] [--first-seed S] [--batch B] [--device cpu|cuda] [--build DIR]
#                              [--out DIR] [--jobs J]
#   scripts/random_programs.sh --replay FILE.json...   runs the given programs alone (a failure to study)
# Defaults: 50000 programs from seed 1000001 (CI's batch uses seeds 1..2000), batches of 5000, the CPU,
# build folder build, one batch at a time (--jobs runs J batches at once, each process on one thread).
# Each batch's failing programs are kept in OUT/batch-<k>/failures/; the counts go
# to OUT/summary.txt. On the GPU the oracle's low-precision runs are PyTorch's CUDA ones, so
# TESSERA_PYTHON (default: the first python3 on PATH) must see the GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
count=50000 first=1000001 batch=5000 device=cpu build=build out="" jobs=1 replay=()
while [ $# -gt 0 ]; do
  case "$1" in
    --count) shift; count=$1 ;;
    --first-seed) shift; first=$1 ;;
    --batch) shift; batch=$1 ;;
    --device) shift; device=$1 ;;
    --build) shift; build=$1 ;;
    --out) shift; out=$1 ;;
    --jobs) shift; jobs=$1 ;;
    --replay) shift; while [ $# -gt 0 ] && [ "${1#--}" = "$1" ]; do replay+=("--program" "$1"); shift; done; continue ;;
    *) echo "random_programs.sh: unknown option $1"; exit 2 ;;
  esac
  shift
done
out=${out:-$build/random-programs-$device}
exe=$build/tests/programs/test_random_programs
[ -x "$exe" ] || { echo "random_programs.sh: no $exe (build the tests first)"; exit 2; }
if [ "$device" = cuda ]; then
  python=${TESSERA_PYTHON:-$(command -v python3)}
  suite=RandomProgramsCuda
else
  python=${TESSERA_PYTHON:-/usr/bin/python3}
  suite=RandomPrograms
fi
mkdir -p "$out"
: > "$out/summary.txt"
if [ ${#replay[@]} -gt 0 ]; then
  dir=$out/replay
  "$exe" --write "$dir" --count 0 "${replay[@]}" && "$python" tests/programs/program_oracle.py "$dir" --device "$device" &&
    TESSERA_PROGRAMS_DIR=$dir "$exe" --gtest_filter="$suite.shard_*" --gtest_brief=1
  exit $?
fi
export OMP_NUM_THREADS=1
run_batch() {  # k first n
  local dir=$out/batch-$1
  { "$exe" --write "$dir" --count "$3" --first-seed "$2" &&
    "$python" tests/programs/program_oracle.py "$dir" --device "$device"; } > "$dir.log" 2>&1 || { cat "$dir.log"; return 2; }
  TESSERA_PROGRAMS_DIR=$dir "$exe" --gtest_filter="$suite.*" --gtest_brief=1 >> "$dir.log" 2>&1
  local rc=$? failed
  failed=$(ls "$dir/failures" 2>/dev/null | wc -l)
  echo "batch $1: seeds $2..$(( $2 + $3 - 1 )): $(grep -h '^PyTorch' "$dir.log"); $failed failed" > "$dir.line"
  return $rc
}
start=$(date +%s) rc=0 k=0 done=0 pids=()
while [ "$done" -lt "$count" ]; do
  n=$(( count - done < batch ? count - done : batch ))
  run_batch "$k" $(( first + done )) "$n" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then wait "${pids[0]}" || rc=1; pids=("${pids[@]:1}"); fi
  done=$(( done + n )) k=$(( k + 1 ))
done
for p in "${pids[@]}"; do wait "$p" || rc=1; done
for ((i = 0; i < k; i++)); do
  cat "$out/batch-$i.line" 2>/dev/null | tee -a "$out/summary.txt"
  grep -h "random programs:\|  rejected" "$out/batch-$i.log" >> "$out/summary.txt"
done
total_failed=$(cat "$out"/batch-*/failures/*.json 2>/dev/null | grep -c '"format"')
echo "$count programs on $device in $(( $(date +%s) - start )) s; $total_failed failed (under $out/batch-*/failures)" | tee -a "$out/summary.txt"
exit $rc
