"""Golden vectors of the vision tower from the HF reference, for a forged multimodal fuel.

    python3 vision_golden.py --fuel DIR --out FILE.json [--device cuda:0]

The fuel is `rocket forge --fuel tiny --layout multimodal --expert-layout fused --seed 1` (what
tests/vision_tower_test.cc forges and compares with). The reference is transformers'
Qwen3_5MoeVisionModel, built from the fuel's `vision_config`, its state loaded strictly from the
checkpoint's `model.visual.` tensors (every parameter then compared bit for bit with the checkpoint),
computed in FP32 on the BF16 weights with TF32 off, eager attention.

Inputs are deterministic and exact in FP32: patch value i of case c is k/32768 - 1, k 16 bits of a
32-bit hash of (c, i) (patch_values; the C++ test computes the same). Cases (grid_thw per image):
  one     [1, 4, 6]                 downsampled positions (the tiny tower's grid is 8 x 8)
  two     [1, 4, 4] + [1, 2, 6]     two images in one call: attention per image (cu_seqlens)
  tall    [1, 10, 4]                rows upsampled, columns downsampled
  frames  [2, 4, 4]                 two frames: attention per frame
Each records the merged embeddings (`pooler_output`, [patches/4, out_hidden]); `one` also the last
block's output (`last_hidden_state`). Cross-checks recorded in the JSON:
  reference_noise   max |two - (each image alone)| / max |value|: the reference's own rounding noise
  full_model        Qwen3_5MoeForConditionalGeneration.from_pretrained(fuel) reads every model.visual.
                    tensor (no missing, unexpected or mismatched vision key) and its tower's
                    parameters equal the standalone tower's
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

PREFIX = "model.visual."
CASES = [
    ("one", 1, [[1, 4, 6]], True),
    ("two", 2, [[1, 4, 4], [1, 2, 6]], False),
    ("tall", 3, [[1, 10, 4]], False),
    ("frames", 4, [[2, 4, 4]], False),
]


def log(msg: str) -> None:
    print(f"[vision_golden] {msg}", flush=True)


def patch_values(np, which: int, count: int):
    """The test's inputs: value i = ((hash(which, i) >> 8) & 0xffff) / 32768 - 1, in uint32 arithmetic."""
    m = np.uint64(0xFFFFFFFF)
    i = np.arange(count, dtype=np.uint64)
    z = (np.uint64(which) * np.uint64(0x9E3779B1) + i * np.uint64(0x85EBCA77) + np.uint64(0x165667B1)) & m
    z ^= z >> np.uint64(15)
    z = (z * np.uint64(0x2C1B3C6D)) & m
    z ^= z >> np.uint64(12)
    z = (z * np.uint64(0x297A2D39)) & m
    z ^= z >> np.uint64(15)
    return (((z >> np.uint64(8)) & np.uint64(0xFFFF)).astype(np.float64) / 32768.0 - 1.0).astype(np.float32)


def vision_state(fuel: str) -> dict:
    """The checkpoint's tower tensors, prefix stripped, as stored (BF16)."""
    files, _ = hf_load.shard_files(fuel)
    state = {}
    for fn in files:
        for name, t in hf_load.load_shard(os.path.join(fuel, fn)).items():
            if name.startswith(PREFIX):
                state[name[len(PREFIX):]] = t
    if not state:
        raise hf_load.LoadError(f"{fuel}: no {PREFIX} tensors")
    return state


def build_tower(torch, config, state: dict, device: str):
    from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeVisionModel
    vcfg = config.vision_config
    vcfg._attn_implementation = "eager"
    tower = Qwen3_5MoeVisionModel(vcfg).to(dtype=torch.float32)
    result = tower.load_state_dict({k: v.to(torch.float32) for k, v in state.items()}, strict=True)
    if result.missing_keys or result.unexpected_keys:
        raise hf_load.LoadError(f"tower state: missing {result.missing_keys}, unexpected {result.unexpected_keys}")
    for name, p in tower.state_dict().items():  # bit for bit: BF16 upcasts to FP32 exactly
        if name in state and not torch.equal(p, state[name].to(torch.float32)):
            raise hf_load.LoadError(f"tower parameter {name} differs from the checkpoint")
    return tower.to(device).eval()


def patch_dim(tower) -> int:
    c = tower.config
    return c.in_channels * c.temporal_patch_size * c.patch_size ** 2


def case_patches(np, tower, which: int, grids: list):
    n = sum(t * h * w for t, h, w in grids)
    return patch_values(np, which, n * patch_dim(tower)).reshape(n, patch_dim(tower))


def run(torch, tower, patches, grids: list, device: str):
    """(merged, last hidden) as float32 numpy arrays, for one call over `grids`."""
    x = torch.from_numpy(patches).to(device)
    grid = torch.tensor(grids, dtype=torch.long, device=device)
    with torch.no_grad():
        out = tower(hidden_states=x, grid_thw=grid)
    if hasattr(out, "pooler_output"):
        merged, hidden = out.pooler_output, out.last_hidden_state
    elif isinstance(out, (tuple, list)):  # older forms returned the merged tensor first
        merged, hidden = out[0], None
    else:
        merged, hidden = out, None
    to_np = lambda t: None if t is None else t.detach().float().cpu().numpy()  # noqa: E731
    return to_np(merged), to_np(hidden)


def flat(np, a) -> list:
    return [float(v) for v in np.asarray(a, dtype=np.float32).reshape(-1)]


def full_model_check(torch, fuel: str, tower) -> dict:
    """Does the ConditionalGeneration class read the forged checkpoint's tower as the standalone one?"""
    from transformers import Qwen3_5MoeForConditionalGeneration
    model, info = Qwen3_5MoeForConditionalGeneration.from_pretrained(fuel, dtype=torch.float32,
                                                                      output_loading_info=True)
    li = {k: [str(x) for x in v] for k, v in (info or {}).items() if isinstance(v, (list, set, tuple))}
    vision_problems = {k: [x for x in v if "visual" in x] for k, v in li.items()}
    vision_problems = {k: v for k, v in vision_problems.items() if v}
    theirs = model.model.visual.state_dict()
    differ = [k for k, v in tower.state_dict().items() if k not in theirs or not torch.equal(theirs[k].cpu(), v.cpu())]
    return {"loading_info_counts": {k: len(v) for k, v in li.items()}, "vision_key_problems": vision_problems,
            "parameters_differ": differ[:20], "ok": not vision_problems and not differ}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fuel", required=True, help="forged multimodal checkpoint directory")
    ap.add_argument("--out", required=True, help="golden JSON to write")
    ap.add_argument("--device", help="default: cuda:0 when available, else cpu")
    ap.add_argument("--no-full-model", action="store_true", help="skip the ConditionalGeneration load check")
    args = ap.parse_args(argv)
    t_start = time.time()
    try:
        import numpy as np
        import torch
        import transformers
        from transformers import AutoConfig
    except ImportError as e:
        log(f"FAILED: {e}")
        return 1
    numerics = golden.setup_numerics(torch)
    device = args.device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    log(f"torch {torch.__version__} transformers {transformers.__version__} device {device}")
    try:
        config = AutoConfig.from_pretrained(args.fuel)
        tower = build_tower(torch, config, vision_state(args.fuel), device)
        cases, results = [], {}
        for name, which, grids, with_hidden in CASES:
            merged, hidden = run(torch, tower, case_patches(np, tower, which, grids), grids, device)
            results[name] = merged
            case = {"name": name, "patch_seed": which, "grids": grids, "merged_shape": list(merged.shape),
                    "merged": flat(np, merged)}
            if with_hidden and hidden is not None:
                case["hidden_shape"] = list(hidden.shape)
                case["hidden"] = flat(np, hidden)
            cases.append(case)
            log(f"{name}: grids {grids} -> merged {list(merged.shape)}, max |value| {float(np.abs(merged).max()):.4g}")
        # The reference's own noise: the two-image call against each image alone (the same patches).
        _, which, grids_two, _ = CASES[1]
        x_two, alone, at = case_patches(np, tower, which, grids_two), [], 0
        for t, h, w in grids_two:
            alone.append(run(torch, tower, x_two[at:at + t * h * w], [[t, h, w]], device)[0])
            at += t * h * w
        alone = np.concatenate(alone)
        noise = float(np.abs(alone - results["two"]).max() / np.abs(results["two"]).max())
        log(f"reference noise (two images batched against alone): {noise:.3g} relative")
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        log(f"FAILED: {type(e).__name__}: {e}")
        return 1

    full = None
    if not args.no_full_model:
        try:
            full = full_model_check(torch, args.fuel, tower)
        except Exception as e:  # noqa: BLE001 - recorded: a question about this transformers version
            traceback.print_exc()
            full = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        log(f"full model check: {full}")

    info = hf_load.inspect_fuel(args.fuel)
    gpu = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else platform.processor()
    out = {
        "fuel": {"name": info["name"], "forge": "tiny", "layout": "multimodal", "experts": "fused", "seed": 1},
        "vision_config": info["config"].get("vision_config"),
        "reference": "transformers Qwen3_5MoeVisionModel, FP32 on the BF16 weights, eager attention, TF32 off",
        "transformers": transformers.__version__,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": gpu or device,
        "numerics": numerics,
        "reference_noise": noise,
        "full_model": full,
        "cases": cases,
        "seconds": round(time.time() - t_start, 2),
    }
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(out, f, separators=(",", ":"), allow_nan=False)
    os.replace(tmp, args.out)
    log(f"wrote {args.out} ({os.path.getsize(args.out) / 1e3:.0f} kB)")
    if full is not None and not full.get("ok"):
        log("CROSS-CHECK FAILED: the full model does not read the forged tower as the standalone one")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
