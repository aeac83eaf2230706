#!/usr/bin/env bash
# The decoding half of a bf16 ablation: one checkpoint translated by `mtkit translate --beam 5`
# in fp32, bf16 and int8 at 1 and 2 threads, two rounds (wall clock with start-up), each output
# scored, and how many bf16 / int8 outputs equal fp32's.
#   benchmarks/decode_dtypes.sh CKPT SRC REF [OUT_DIR]
# e.g. the AMX ablation's (benchmarks/README.md):
#   benchmarks/decode_dtypes.sh .bench/demo-ab-amx/runs/modern_fp32-seed1/checkpoint_last.pt \
#     .bench/demo-ab-amx/data/raw/test_2016_flickr.en .bench/demo-ab-amx/data/raw/test_2016_flickr.de
set -euo pipefail
cd "$(dirname "$0")/.."
CK=$1 SRC=$2 REF=$3 OUT=${4:-.bench/decode-dtypes}
BIN=.venv/bin
mkdir -p "$OUT"
$BIN/python benchmarks/machine.py
for round in 1 2; do
  for threads in 1 2; do
    for dtype in fp32 bf16 int8; do
      opts=(--dtype "$dtype")
      [ "$dtype" = int8 ] && opts=(--dtype fp32 --quantize int8)
      start=$(date +%s.%N)
      OMP_NUM_THREADS=$threads $BIN/mtkit translate -m "$CK" -i "$SRC" -o "$OUT/$dtype.$threads.txt" \
        --beam 5 --threads "$threads" "${opts[@]}" -q
      end=$(date +%s.%N)
      score=$($BIN/mtkit evaluate -i "$OUT/$dtype.$threads.txt" -r "$REF" --metrics bleu,chrf --json)
      echo "round $round, $threads thread(s), $dtype: $(echo "$end - $start" | bc) s; $score"
    done
  done
done
for dtype in bf16 int8; do
  same=$(paste "$OUT/fp32.1.txt" "$OUT/$dtype.1.txt" | awk -F'\t' '$1 == $2' | wc -l)
  echo "$dtype outputs equal to fp32's: $same of $(wc -l < "$OUT/fp32.1.txt")"
done
