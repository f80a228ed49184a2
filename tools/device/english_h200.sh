#!/usr/bin/env bash
# The trained english fuel on the H200 engine (docs/numerics.md), one GPU-machine call: parity of
# its BF16 engine with the HF goldens, then the quality gate on its held-out text of the H200 engine
# with NVFP4 experts against the H200 BF16 engine, and of the H200 BF16 engine (BF16 activations)
# against the host engine (FP32 activations) of the same weights.
#
# Needs (carry `.carry/h200/rocket.xz`, `.carry/h200/lib`, `.carry/h200/engine-lib.tar.xz` and
# `.carry/english`): the rocket CLI, libgomp and libfmt, and the engines' shared libraries from
# tools/device/prepare_h200.sh, and the engines built here with `rocket build fuels/english --booster
# h200 --no-weights` (.carry/english/bf16; .carry/english/nvfp4e with --precision experts=nvfp4), each
# without its lib/ and with bin/rocket-engine xz-compressed (a call carries 64 MiB with the tree), and
# optionally `--booster host` (.carry/english/host). Writes to $OUT (default /tmp/english-h200).
set -uo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
OUT=${OUT:-/tmp/english-h200}
ROCKET=/tmp/rocket-cli
python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.open(sys.argv[1]).read())' "$ROOT/.carry/h200/rocket.xz" "$ROCKET"
chmod +x "$ROCKET"
export LD_LIBRARY_PATH="$ROOT/.carry/h200/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fuel=$ROOT/fuels/english golden=$ROOT/tests/golden
mkdir -p "$OUT"
status=0
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/device.txt"
for n in bf16 nvfp4e host; do
  [[ -d $ROOT/.carry/english/$n ]] || continue
  rm -rf "/tmp/english-$n" && cp -r "$ROOT/.carry/english/$n" "/tmp/english-$n"
  if [[ -f /tmp/english-$n/bin/rocket-engine.xz ]]; then
    python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.open(sys.argv[1]).read())' \
      "/tmp/english-$n/bin/rocket-engine.xz" "/tmp/english-$n/bin/rocket-engine"
    chmod +x "/tmp/english-$n/bin/rocket-engine" && rm "/tmp/english-$n/bin/rocket-engine.xz"
    mkdir -p "/tmp/english-$n/lib"
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' \
      "$ROOT/.carry/h200/engine-lib.tar.xz" "/tmp/english-$n/lib"
  fi
  booster=h200; [[ $n == host ]] && booster=host
  "$ROCKET" build "$fuel" --booster $booster --weights-only --out "/tmp/english-$n" || status=1
done
/tmp/english-bf16/bin/rocket-engine parity --golden "$golden/english_bf16.json" --full "$golden/english_bf16_last.bin" \
  2>&1 | tee "$OUT/parity_bf16.log" || status=1
gate() {  # gate NAME CANDIDATE REFERENCE
  "$ROCKET" gate "/tmp/english-$2" --reference "/tmp/english-$3" --text "$fuel/heldout.txt" --out "$OUT/gate-$1.json" \
    --max-kl-mean 0.01 --max-kl-p99 0.1 --min-top1 0.93 2>&1 | tee "$OUT/gate-$1.log"
}
gate h200-nvfp4e-vs-h200-bf16 nvfp4e bf16 || status=1
[[ -d /tmp/english-host ]] && { gate h200-bf16-vs-host bf16 host || status=1; }
exit $status
