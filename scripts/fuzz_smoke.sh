#!/usr/bin/env bash
# Runs every libFuzzer target (fuzz/) for a bounded time from its committed seed corpus and prints the
# executions of each; a crash, a sanitizer report, a timeout or running out of memory fails the run,
# and the input that did it is kept in BUILD/fuzz-artifacts/. `./run test` calls it with the short
# default; a longer run passes its own seconds.
# usage: scripts/fuzz_smoke.sh BUILD_DIR [SECONDS_PER_TARGET] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:?usage: fuzz_smoke.sh BUILD_DIR [SECONDS] [TARGET...]}
secs=${2:-15}
shift $(( $# >= 2 ? 2 : 1 ))
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(safetensors idx gzip gpt2_config checkpoint_meta text_dataset)

seeds() {  # the committed seed corpus of a target
  if [ "$1" = safetensors ]; then echo tests/io/corpus; else echo "fuzz/corpus/$1"; fi
}

mkdir -p "$build/fuzz-artifacts"
status=0
for t in "${targets[@]}"; do
  exe="$build/fuzz/fuzz_$t"
  [ -x "$exe" ] || { echo "fuzz_smoke: $exe is not built"; exit 1; }
  work=$(mktemp -d)  # new inputs go here, not into the tree's corpus
  log="$build/fuzz-artifacts/fuzz_$t.log"
  rc=0
  "$exe" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$build/fuzz-artifacts/${t}_" "$work" "$(seeds "$t")" >"$log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  if [ "$rc" -eq 0 ]; then
    echo "==> fuzz_$t: ${execs:-?} executions in ${secs} s (${cov:-no coverage line}), no finding"
  else
    echo "==> fuzz_$t FAILED (exit $rc) after ${execs:-?} executions; the input is in $build/fuzz-artifacts/:"
    tail -40 "$log"
    status=1
  fi
  rm -rf "$work"
done
exit "$status"
