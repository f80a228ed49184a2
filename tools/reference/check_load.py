"""Can the HF reference load this fuel, and does it compute something sane?

    python3 check_load.py --fuel DIR [--dtype bfloat16] [--tokens 16] [--quant all|auto|hf|hf_dequant|manual]

Loads through hf_load (CUDA when available), runs one forward over a short prompt and a few cached
greedy steps, and prints the parameter count, the loading path, the top-5 next tokens and whether
the logits are finite.

A bf16 fuel is loaded once (from_pretrained, or the manual expert fuse if HF did not map the
per-expert tensors). A quantised fuel (block FP8, ModelOpt NVFP4) is tried every way (--quant all,
the default): transformers' own quantizer ("hf"), FineGrainedFP8 with dequantize=True
("hf_dequant", FP8 only) and dequantisation done here ("manual"), and each HF result is compared
with the manual one. transformers may not support a format at all: that is reported, not crashed on.

Exit status: 0 all good; 1 nothing could be loaded, or a load/forward problem; 3 only the manual
dequantised reference loads (transformers cannot run this format); 4 HF and the manual reference
disagree on the next token.
"""
from __future__ import annotations

import argparse
import gc
import os
import sys
import time
import traceback

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import hf_load  # noqa: E402

PROBE_TEXT = ("Rocket reference check: the quick brown fox jumps over the lazy dog, "
              "then counts 1 2 3 4 5 6 7 8 9 10 and writes def main(): return 0")


def log(msg: str) -> None:
    print(f"[check_load] {msg}", flush=True)


def probe_ids(tok, n: int, vocab: int) -> list:
    ids = tok.encode(PROBE_TEXT) if tok is not None else []
    if not ids:
        ids = [(1009 * i + 17) % min(vocab, 150000) for i in range(n)]  # distinct, deterministic
    while len(ids) < n:
        ids = ids + ids
    return ids[:n]


def probe(torch, model, tok, n_tokens: int, gen: int, device: str) -> dict:
    vocab = model.config.vocab_size
    ids = probe_ids(tok, n_tokens, vocab)
    out = {"prompt_ids": ids}
    t0 = time.time()
    with torch.inference_mode():
        x = torch.tensor([ids], dtype=torch.long, device=device)
        res = model(input_ids=x, use_cache=True)
        logits = res.logits[0].float()
        out["forward_seconds"] = round(time.time() - t0, 3)
        out["finite"] = bool(torch.isfinite(logits).all())
        last = logits[-1]
        top = torch.topk(last, 5)
        out["top5"] = [(int(i), float(v)) for v, i in zip(top.values, top.indices)]
        out["last_row"] = last.cpu()
        out["logit_absmax"] = float(logits.abs().max()) if out["finite"] else float("nan")
        # A few cached decode steps: the recurrent/KV cache path, not just prefill.
        past, nxt, toks = res.past_key_values, int(torch.argmax(last)), []
        for k in range(gen):
            toks.append(nxt)
            if k == gen - 1:
                break
            r = model(input_ids=torch.tensor([[nxt]], device=device), past_key_values=past, use_cache=True,
                      position_ids=torch.tensor([[len(ids) + k]], device=device))
            past = r.past_key_values
            step = r.logits[0, -1].float()
            if not bool(torch.isfinite(step).all()):
                out["finite"] = False
            nxt = int(torch.argmax(step))
        out["greedy"] = toks
    if tok is not None:
        out["top5_text"] = [tok.decode([i]) for i, _ in out["top5"]]
        out["greedy_text"] = tok.decode(toks)
    return out


def attempt(torch, fuel: str, dtype, device: str, quant: str, n_tokens: int, gen: int, tokenizer_dir=None) -> dict:
    log(f"--- attempt quant={quant} dtype={dtype} device={device}")
    model = None
    try:
        t0 = time.time()
        model, tok, report = hf_load.load_model(fuel, dtype, device, quant=quant, tokenizer_dir=tokenizer_dir)
        r = probe(torch, model, tok, n_tokens, gen, device)
        r.update(ok=True, loading_path=report["loading_path"], param_count=report["param_count"],
                 load_seconds=round(time.time() - t0, 2), report=report)
        if not r["finite"]:
            r["ok"] = False
            r["error"] = "non-finite logits"
        return r
    except hf_load.LoadError as e:
        log(f"quant={quant}: {e}")
        return {"ok": False, "error": str(e)}
    except Exception as e:  # noqa: BLE001 - every failure is reported with its traceback
        traceback.print_exc()
        return {"ok": False, "error": f"{type(e).__name__}: {e}"}
    finally:
        del model
        gc.collect()
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def compare(torch, a: dict, ref: dict) -> dict:
    x, y = a["last_row"], ref["last_row"]
    d = (x - y).abs()
    ta = [i for i, _ in a["top5"]]
    tr = [i for i, _ in ref["top5"]]
    return {"max_abs_diff": float(d.max()), "ref_absmax": float(y.abs().max()),
            "argmax_equal": ta[0] == tr[0], "top5_overlap": len(set(ta) & set(tr)),
            "greedy_equal": a["greedy"] == ref["greedy"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fuel", required=True)
    ap.add_argument("--dtype", choices=("bfloat16", "float32"), default="bfloat16")
    ap.add_argument("--tokens", type=int, default=16, help="prompt length of the probe forward")
    ap.add_argument("--gen", type=int, default=4, help="cached greedy steps after the forward")
    ap.add_argument("--quant", default="all", choices=("all", "auto", "hf", "hf_dequant", "manual"))
    ap.add_argument("--device")
    ap.add_argument("--tokenizer", help="tokenizer directory to use when the fuel has no tokenizer.json")
    args = ap.parse_args(argv)

    try:
        info = hf_load.inspect_fuel(args.fuel)
    except hf_load.LoadError as e:
        log(f"FAILED: {e}")
        return 1
    print(hf_load.describe_fuel(info), flush=True)
    try:
        import torch
        import transformers
    except ImportError as e:
        log(f"FAILED: {e}")
        return 1
    for what, fn in (("allow_tf32", lambda: setattr(torch.backends.cuda.matmul, "allow_tf32", False)),
                     ("cudnn tf32", lambda: setattr(torch.backends.cudnn, "allow_tf32", False))):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            log(f"could not turn off {what}: {e}")
    device = args.device or ("cuda:0" if torch.cuda.is_available() else "cpu")
    dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[args.dtype]
    log(f"torch {torch.__version__} transformers {transformers.__version__} device {device}")

    fmt = info["format"]
    if fmt == "bf16" or args.quant != "all":
        quants = ["auto" if fmt == "bf16" else args.quant]
    else:
        quants = ["hf"] + (["hf_dequant"] if fmt == "fp8" else []) + ["manual"]
    results = {q: attempt(torch, args.fuel, dtype, device, q, args.tokens, args.gen, args.tokenizer) for q in quants}

    print("", flush=True)
    log(f"=== {info['name']} ({fmt}) summary")
    ref = results.get("manual") if results.get("manual", {}).get("ok") else None
    disagree = False
    for q, r in results.items():
        if not r["ok"]:
            log(f"  {q:<10} FAILED: {r['error'][:600]}")
            continue
        log(f"  {q:<10} ok: path {r['loading_path']}, {r['param_count']:,} parameters, load {r['load_seconds']} s, "
            f"forward {r['forward_seconds']} s, finite {r['finite']}, |logit|max {r['logit_absmax']:.4g}")
        log(f"  {'':<10} top-5 next: " + ", ".join(
            f"{i} ({v:.4f}{', ' + repr(t) if t is not None else ''})"
            for (i, v), t in zip(r["top5"], r.get("top5_text", [None] * 5))))
        log(f"  {'':<10} cached greedy: {r['greedy']} {r.get('greedy_text')!r}")
        if ref is not None and q != "manual":
            c = compare(torch, r, ref)
            log(f"  {'':<10} vs manual dequant: max|diff| {c['max_abs_diff']:.4g} (|ref|max {c['ref_absmax']:.4g}), "
                f"argmax equal {c['argmax_equal']}, top-5 overlap {c['top5_overlap']}/5, greedy equal {c['greedy_equal']}")
            disagree = disagree or not c["argmax_equal"]

    ok = [q for q, r in results.items() if r["ok"]]
    hf_ok = [q for q in ok if q in ("auto", "hf", "hf_dequant")]
    if not ok:
        log("RESULT: nothing could be loaded")
        return 1
    if fmt == "bf16":
        log("RESULT: ok")
        return 0
    if not hf_ok:
        log("RESULT: transformers cannot run this format here; only the manual dequantised reference loads")
        return 3
    if "manual" not in ok:
        log("RESULT: transformers loads it but the manual dequantised reference failed")
        return 1
    if disagree:
        log("RESULT: transformers and the manual dequantised reference disagree on the next token")
        return 4
    log(f"RESULT: ok ({', '.join(hf_ok)} and manual agree on the next token)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
