#!/usr/bin/env python3
"""How far two golden files' logits are apart, with the parity measure the engines use
(src/fuel/golden.h compare_logits): per position, the largest |a - b| over the coordinates both files
hold (the strided sample, and top-64 ids present in both), relative to the row's largest |reference|
value. Only prompt positions are compared (the greedy continuations of two references may differ).

Used to calibrate a dtype's parity tolerance: HF's own bf16 run against HF's fp32 goldens is the noise a
bf16-activation engine cannot be asked to beat.

    compare_goldens.py REFERENCE.json CANDIDATE.json
"""
import json
import sys


def main():
    ref, cand = (json.load(open(p)) for p in sys.argv[1:3])
    if ref["sample_stride"] != cand["sample_stride"]:
        sys.exit("the files sample logits at different strides")
    rels = []
    for pr, pc in zip(ref["prompts"], cand["prompts"]):
        if pr["prompt_ids"] != pc["prompt_ids"]:
            sys.exit("the files hold different prompts")
        for qr, qc in list(zip(pr["positions"], pc["positions"]))[:len(pr["prompt_ids"])]:
            scale = max(max(abs(v) for v in qr["sample"]), max(abs(v) for v in qr["top_logits"]))
            diff = max(abs(a - b) for a, b in zip(qr["sample"], qc["sample"]))
            cand_top = dict(zip(qc["top_ids"], qc["top_logits"]))
            for i, v in zip(qr["top_ids"], qr["top_logits"]):
                if i in cand_top:
                    diff = max(diff, abs(v - cand_top[i]))
            rels.append(diff / scale)
    rels.sort()
    pick = lambda q: rels[min(len(rels) - 1, int(q * (len(rels) - 1)))]
    print(f"{len(rels)} prompt positions: relative logit difference median {pick(0.5):.4f}, "
          f"p90 {pick(0.9):.4f}, max {rels[-1]:.4f}")


if __name__ == "__main__":
    main()
