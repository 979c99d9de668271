#!/usr/bin/env bash
# The GPT-2 loss-curve parity with each of tessera's fused GPU paths swapped for its composite, to tell
# which path a difference comes from (bench/NOTES.md "GPT-2 loss-curve parity, bisected"). Needs
# build/bench/bench_models (cuda preset) and a PyTorch with CUDA as python3.
#   OUT=dir scripts/parity_variants.sh "LABEL:PARITY ARGS" ...
# e.g. "small:--text python" "big:--config 124m --text python --batch 8 --seq 512". Per spec it runs four
# variants at once on the GPU: default, all (no flash attention, full logits, unfused blocks, unfused
# AdamW), no-flash and fp32; SERIAL=1 waits for each spec's four before the next. Writes OUT/p.tgz (the
# curves as JSON and the printed tables) and prints one summary line per run.
set -u
export PATH=/usr/local/cuda/bin:$PATH
cd "$(dirname "$0")/.."
OUT=${OUT:-build/parity-variants}
mkdir -p "$OUT/p"
run1() {
  local n=$1; shift
  {
    timeout 500 python3 bench/gpt2_loss_parity.py --json-out "$OUT/p/$n.json" "$@" > "$OUT/p/$n.txt" 2>&1
    echo "$n: $(tail -1 "$OUT/p/$n.txt")"
    grep -E "^ *(0|20|40|60|80|100|150|190)-" "$OUT/p/$n.txt" | tr "\n" "|"
    echo
  } > "$OUT/p/$n.sum"
}
for s in "$@"; do
  l=${s%%:*} a=${s#*:}
  # shellcheck disable=SC2086  # the spec's arguments split on spaces
  run1 "$l-default" $a &
  run1 "$l-all" $a --tessera-arg=--no-flash --tessera-arg=--gpt-logits --tessera-arg=--unfused --tessera-arg=--unfused-adamw &
  run1 "$l-noflash" $a --tessera-arg=--no-flash &
  run1 "$l-fp32" $a --fp32 &
  [ -n "${SERIAL:-}" ] && wait
done
wait
cat "$OUT"/p/*.sum
tar czf "$OUT/p.tgz" -C "$OUT" p && rm -rf "$OUT/p"
