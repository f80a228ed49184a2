"""First-token logits of prompts with images from the HF reference, for a forged multimodal fuel.

    python3 prompt_image_golden.py --fuel DIR --out FILE.json [--device cuda:0]

The fuel is `rocket forge --fuel tiny --format bf16 --layout multimodal --expert-layout fused --seed 1`
(what tests/e2e/layouts.sh builds its multimodal host engine from; `rocket-engine imagecheck --golden`
compares with this file). The reference is transformers' Qwen3_5MoeForConditionalGeneration loaded
from the fuel, FP32 on the BF16 weights, TF32 off, eager attention.

Each case is a token prompt (ordinary token ids from a seeded generator, `<|vision_start|>`, one
`<|image_pad|>` per merged patch, `<|vision_end|>`, from the fuel's config) and its images' grids;
the patches are deterministic and exact in FP32 (vision_golden.py's patch_values, seed per case; the
engine computes the same). One forward with input_ids, mm_token_type_ids (1 at image tokens),
pixel_values and image_grid_thw; recorded per case:
  logits         the FP32 logits row of the last prompt position at the indices `logits_at` (sparse_row:
                 the row's 2,048 largest values and every 32nd index, ascending; the full rows would
                 add 6 MB to a repository every GPU call carries), `vocab` its length
  positions      get_rope_index's [3][tokens] position ids, and rope_delta (model.model.rope_deltas)
  greedy         the argmax of the row, and its margin over the second
  decode_logits  the logits after feeding that token back (one cached decode step at index + delta), at
                 `decode_logits_at` likewise
Cross-checks: the same prompt with the patches of another seed gives other logits (images reach the
text model), and the cached step's logits equal a full forward over prompt + token within the
reference's own noise (recorded).
Exit status: 0 written, 1 load/run failure, 2 written but a cross-check failed.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import golden  # noqa: E402  (sets the offline environment and the FP32 numerics)
import hf_load  # noqa: E402
from vision_golden import patch_values  # noqa: E402

# (name, patch seed, text seed, layout): layout lists text runs (ints: that many ordinary tokens) and
# images ([t, h, w] grids), in prompt order; each image is wrapped in vision_start / vision_end.
CASES = [
    ("one", 31, 1, [3, [1, 4, 6], 2]),
    ("two", 32, 2, [2, [1, 2, 2], 4, [1, 4, 4], 3]),
]
ORDINARY = 151643  # ordinary token ids are below Qwen's special tokens
TOP, STRIDE = 2048, 32  # sparse_row: the largest values (where greedy and sampling live) and a uniform sample


def sparse_row(row: list) -> tuple[list, list]:
    """The indices (ascending) and FP32 values of a logits row the golden keeps: its TOP largest values
    and every STRIDE-th index. The engine compares at exactly these; the largest value, the scale of the
    comparison, is among them."""
    import numpy as np
    arr = np.asarray(row, dtype=np.float32)
    keep = set(int(i) for i in np.argsort(-arr, kind="stable")[:TOP]) | set(range(0, len(arr), STRIDE))
    at = sorted(keep)
    return at, golden.f32_list(arr[at])


def log(msg: str) -> None:
    print(f"[prompt_image_golden] {msg}", flush=True)


def build_prompt(np, config, text_seed: int, layout: list, merge: int):
    rng = np.random.default_rng(text_seed)
    ids, grids = [], []
    for part in layout:
        if isinstance(part, int):
            ids += [int(x) for x in rng.integers(0, ORDINARY, size=part)]
        else:
            t, h, w = part
            grids.append([t, h, w])
            ids += [config.vision_start_token_id] + [config.image_token_id] * (t * (h // merge) * (w // merge))
            ids += [config.vision_end_token_id]
    return ids, grids


def forward(torch, model, ids, pixel_values, grids, image_token: int, device: str):
    input_ids = torch.tensor([ids], dtype=torch.long, device=device)
    mm = (input_ids == image_token).to(torch.int32)
    grid = torch.tensor(grids, dtype=torch.long, device=device)
    with torch.no_grad():
        out = model(input_ids=input_ids, mm_token_type_ids=mm, pixel_values=pixel_values, image_grid_thw=grid,
                    use_cache=True)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fuel", required=True, help="forged multimodal checkpoint directory")
    ap.add_argument("--out", required=True, help="golden JSON to write")
    ap.add_argument("--device", help="default: cuda:0 when available, else cpu")
    ap.add_argument("--forge", default="tiny", help="the forge's --fuel, recorded in the golden")
    ap.add_argument("--layers", type=int, default=0, help="the forge's --layers, recorded (0: the fuel's own)")
    args = ap.parse_args(argv)
    t_start = time.time()
    try:
        import numpy as np
        import torch
        import transformers
        from transformers import AutoConfig, Qwen3_5MoeForConditionalGeneration
    except ImportError as e:
        log(f"FAILED: {e}")
        return 1
    numerics = golden.setup_numerics(torch)
    device = args.device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    log(f"torch {torch.__version__} transformers {transformers.__version__} device {device}")
    cases, problems = [], []
    try:
        config = AutoConfig.from_pretrained(args.fuel)
        config._attn_implementation = "eager"
        model = Qwen3_5MoeForConditionalGeneration.from_pretrained(args.fuel, config=config, dtype=torch.float32)
        model = model.to(device).eval()
        v = config.vision_config
        patch_dim = v.in_channels * v.temporal_patch_size * v.patch_size ** 2
        merge = v.spatial_merge_size
        for name, patch_seed, text_seed, layout in CASES:
            ids, grids = build_prompt(np, config, text_seed, layout, merge)
            n_patches = sum(t * h * w for t, h, w in grids)
            pixels = lambda seed: torch.from_numpy(  # noqa: E731
                patch_values(np, seed, n_patches * patch_dim).reshape(n_patches, patch_dim)).to(device)
            out = forward(torch, model, ids, pixels(patch_seed), grids, config.image_token_id, device)
            row = out.logits[0, -1].float()
            top2 = torch.topk(row, 2)
            greedy = int(top2.indices[0])
            delta = int(model.model.rope_deltas.reshape(-1)[0])
            mm = (torch.tensor([ids], device=device) == config.image_token_id).to(torch.int32)
            positions, deltas = model.model.get_rope_index(
                torch.tensor([ids], dtype=torch.long, device=device), mm,
                image_grid_thw=torch.tensor(grids, dtype=torch.long, device=device))
            # One cached decode step: the greedy token at index len(ids), position len(ids) + delta.
            with torch.no_grad():
                step = model(input_ids=torch.tensor([[greedy]], device=device), past_key_values=out.past_key_values,
                             use_cache=True)
            decode_row = step.logits[0, -1].float()
            # Cross-checks: another image changes the logits; the cached step is the full forward's last row.
            other = forward(torch, model, ids, pixels(patch_seed + 1000), grids, config.image_token_id, device)
            other_gap = float((other.logits[0, -1].float() - row).abs().max() / row.abs().max())
            model.model.rope_deltas = None
            full = forward(torch, model, ids + [greedy], pixels(patch_seed), grids, config.image_token_id, device)
            step_noise = float((full.logits[0, -1].float() - decode_row).abs().max() / decode_row.abs().max())
            if other_gap < 1e-3:
                problems.append(f"{name}: another image changes the logits by only {other_gap:.3g}")
            if step_noise > 1e-4:
                problems.append(f"{name}: the cached step differs from the full forward by {step_noise:.3g}")
            logits_at, logits = sparse_row(row.cpu().tolist())
            decode_at, decode_logits = sparse_row(decode_row.cpu().tolist())
            cases.append({
                "name": name, "patch_seed": patch_seed, "grids": grids, "prompt_ids": ids,
                "positions": positions[:, 0].tolist(), "rope_delta": delta,
                "rope_delta_get_rope_index": int(deltas.reshape(-1)[0]),
                "greedy": greedy, "margin": float(top2.values[0] - top2.values[1]),
                "vocab": int(row.numel()), "logits_at": logits_at, "logits": logits,
                "decode_logits_at": decode_at, "decode_logits": decode_logits,
                "other_image_gap": other_gap, "step_noise": step_noise,
            })
            log(f"{name}: {len(ids)} tokens, grids {grids}, rope delta {delta}, greedy {greedy}, "
                f"other image gap {other_gap:.3g}, step noise {step_noise:.3g}")
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        log(f"FAILED: {type(e).__name__}: {e}")
        return 1
    info = hf_load.inspect_fuel(args.fuel)
    gpu = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else platform.processor()
    out = {
        "fuel": {"name": info["name"], "forge": args.forge, "layers": args.layers, "format": "bf16",
                 "layout": "multimodal", "experts": "fused", "seed": 1},
        "reference": "transformers Qwen3_5MoeForConditionalGeneration, FP32 on the BF16 weights, eager, TF32 off",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": gpu or device,
        "numerics": numerics,
        "problems": problems,
        "cases": cases,
        "seconds": round(time.time() - t_start, 2),
    }
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(out, f, separators=(",", ":"), allow_nan=False)
    os.replace(tmp, args.out)
    log(f"wrote {args.out} ({os.path.getsize(args.out) / 1e3:.0f} kB)")
    if problems:
        log("CROSS-CHECK FAILED: " + "; ".join(problems))
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
