#!/usr/bin/env python3
"""The HF reference's image processor on fixed images: what src/vision's decode + preprocess must give.

Run on the GPU machine (transformers 5.17, torch 2.11, PIL live there only):
    python3 tools/reference/image_golden.py --out tests/golden/vision_processor.json
Each case is an image file made here with PIL from a fixed numpy seed (PNG RGB, RGBA, 16-bit gray and
palette; JPEG baseline, progressive and with an EXIF orientation; WebP lossy and lossless), loaded the
way transformers loads an image (`transformers.image_utils.load_image` on the file: PIL open, EXIF
transpose, RGB), and run through `Qwen2VLImageProcessor` (the default backend) with the Qwen3.5 /
Qwen3-VL preprocessor_config values, at the releases' pixel bounds and at small bounds that make small
images both grow and shrink. The JSON holds the file's bytes (base64), the processor's grid, and its
pixel_values as the 8-bit levels they normalise (v = (level / 255 - 0.5) / 0.5 exactly invertible: the
script checks it): every level where the array is small, else every 13th level and a SHA-256 of all.
"""
import argparse
import base64
import hashlib
import io
import json
import os
import sys
import tempfile

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    import PIL
    from PIL import Image
    import torch
    import transformers
    from transformers import Qwen2VLImageProcessor
    from transformers.image_utils import load_image

    rng = np.random.default_rng(20261207)

    def smooth_rgb(h, w):
        y, x = np.mgrid[0:h, 0:w]
        base = np.stack([(x * 255 // max(w - 1, 1)), (y * 255 // max(h - 1, 1)), ((x + y) * 7) % 256], -1)
        noise = rng.integers(-40, 41, size=(h, w, 3))
        return np.clip(base + noise, 0, 255).astype(np.uint8)

    def encode(img, fmt, **kw):
        b = io.BytesIO()
        img.save(b, format=fmt, **kw)
        return b.getvalue()

    small = {"shortest_edge": 1024, "longest_edge": 16384}
    release = {"shortest_edge": 65536, "longest_edge": 16777216}
    cases = []
    cases.append(("png_rgb_77x53", encode(Image.fromarray(smooth_rgb(53, 77)), "PNG"), small))
    rgba = np.concatenate([smooth_rgb(90, 40), rng.integers(0, 256, size=(90, 40, 1), dtype=np.uint8)], -1)
    cases.append(("png_rgba_40x90", encode(Image.fromarray(rgba, "RGBA"), "PNG"), small))
    gray16 = rng.integers(0, 65536, size=(50, 50)).astype(np.uint16)
    cases.append(("png_gray16_50x50", encode(Image.fromarray(gray16, "I;16"), "PNG"), small))
    pal = Image.fromarray(smooth_rgb(65, 33)).convert("P", palette=Image.Palette.ADAPTIVE, colors=37)
    cases.append(("png_palette_33x65", encode(pal, "PNG"), small))
    cases.append(("jpeg_120x80", encode(Image.fromarray(smooth_rgb(80, 120)), "JPEG", quality=90), small))
    cases.append(("jpeg_progressive_96x72", encode(Image.fromarray(smooth_rgb(72, 96)), "JPEG", quality=85, progressive=True), small))
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 CW to display
    cases.append(("jpeg_exif6_64x48", encode(Image.fromarray(smooth_rgb(48, 64)), "JPEG", quality=92, exif=exif), small))
    cases.append(("webp_lossy_64x40", encode(Image.fromarray(smooth_rgb(40, 64)), "WEBP", quality=80), small))
    cases.append(("webp_lossless_50x30", encode(Image.fromarray(smooth_rgb(30, 50)), "WEBP", lossless=True), small))
    cases.append(("jpeg_release_bounds_200x150", encode(Image.fromarray(smooth_rgb(150, 200)), "JPEG", quality=90), release))

    out = {
        "reference": "transformers Qwen2VLImageProcessor on transformers.image_utils.load_image(file)",
        "transformers": transformers.__version__, "torch": torch.__version__, "pil": PIL.__version__,
        "python": sys.version.split()[0],
        "processor": {"patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
                      "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]},
        "cases": [],
    }
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for name, data, size in cases:
            proc = Qwen2VLImageProcessor(patch_size=16, temporal_patch_size=2, merge_size=2, image_mean=[0.5, 0.5, 0.5],
                                         image_std=[0.5, 0.5, 0.5], size=size)
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(data)
            image = load_image(path)
            r = proc(images=[image], return_tensors="pt")
            pv = r["pixel_values"].to(torch.float64).numpy()
            grid = [int(v) for v in r["image_grid_thw"][0].tolist()]
            levels = np.rint((pv * 0.5 + 0.5) * 255.0)
            back = (levels / 255.0 - 0.5) / 0.5
            err = float(np.abs(back - pv).max())
            if err > 1e-6 or levels.min() < 0 or levels.max() > 255:
                print(f"[image_golden] {name}: pixel_values are not 8-bit levels (max error {err})", file=sys.stderr)
                ok = False
            lv = levels.astype(np.uint8).reshape(-1)
            case = {"name": name, "bytes_base64": base64.b64encode(data).decode(), "size": size,
                    "loaded_wh": list(image.size), "grid_thw": grid, "shape": list(pv.shape),
                    "levels_sha256": hashlib.sha256(lv.tobytes()).hexdigest()}
            if lv.size <= 65536:
                case["levels_base64"] = base64.b64encode(lv.tobytes()).decode()
            else:
                case["levels_every_13th_base64"] = base64.b64encode(lv[::13].tobytes()).decode()
            out["cases"].append(case)
            print(f"[image_golden] {name}: loaded {image.size[0]}x{image.size[1]}, grid {grid}, pixel_values {list(pv.shape)}")
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"[image_golden] wrote {args.out} ({os.path.getsize(args.out) // 1024} kB)")
    return 0 if ok else 2


if __name__ == "__main__":
    sys.exit(main())
