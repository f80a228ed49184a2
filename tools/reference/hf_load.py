"""Loads a Rocket fuel (a qwen3_5_moe text-only HF checkpoint) into the HF reference model.

The HF modeling file is the definition of correct, so the loader's first job is to prove that the
fuel's on-disk layout is one HF reads as-is:

  1. `Qwen3_5MoeForCausalLM.from_pretrained(dir, output_loading_info=True)`. transformers 5 keeps
     routed experts fused (`mlp.experts.gate_up_proj` [E, 2I, H] = cat(gate, up) on dim 1,
     `mlp.experts.down_proj` [E, H, I]) and converts per-expert checkpoint tensors on load only if
     a conversion mapping is registered for the model type.
  2. If the only problem is that HF did not map the per-expert tensors, that is said loudly and the
     experts are fused here, from the safetensors files, and loaded with `load_state_dict(strict=True)`.
  3. Any other missing, unexpected or mismatched key is a hard error (`LoadError`).
  4. Every model tensor is then compared bit for bit with the checkpoint (upcast to the model's
     dtype), so a gate/up order swap or a transposition cannot pass silently.

Quantised fuels (block FP8, ModelOpt NVFP4) can be loaded three ways (`quant=`):
  "hf"          transformers' own quantizer, as the config asks (may be unsupported: reported)
  "hf_dequant"  FP8 only: transformers' FineGrainedFP8 with `dequantize=True`
  "manual"      weights dequantised here to FP32 (FP8: w * scale_inv per 128x128 block;
                NVFP4: e2m1 * e4m3 scale per 16 along K * weight_scale_2), then loaded into a plain
                (unquantised) model like a bf16 fuel. This is the weight-only reference.

Nothing here touches the network; run with HF_HUB_OFFLINE=1.
`python3 hf_load.py --fuel DIR` prints the fuel inventory (needs no torch).
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import re
import shutil
import struct
import sys
import tempfile
import time
import traceback

# Per-expert checkpoint tensor: model.layers.{l}.mlp.experts.{e}.{gate,up,down}_proj.weight
EXPERT_RE = re.compile(r"^(?P<prefix>.+\.mlp\.experts)\.(?P<e>\d+)\.(?P<proj>gate_proj|up_proj|down_proj)\.weight$")
# Fused model parameter: model.layers.{l}.mlp.experts.{gate_up_proj,down_proj}
FUSED_RE = re.compile(r"^(?P<prefix>.+\.mlp\.experts)\.(?P<which>gate_up_proj|down_proj)$")
# Checkpoint tensors that belong to parts the text-only CausalLM does not have (HF ignores them too).
IGNORED_PREFIXES = ("mtp.", "model.visual.", "visual.")
QUANT_SUFFIXES = (".weight_scale_inv", ".weight_scale_2", ".weight_scale", ".input_scale")
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)

# safetensors dtype name -> bytes per element (U8 is packed FP4 for NVFP4 weights).
ST_DTYPE_SIZE = {"BF16": 2, "F16": 2, "F32": 4, "F64": 8, "F8_E4M3": 1, "F8_E5M2": 1, "U8": 1, "I8": 1,
                 "I16": 2, "I32": 4, "I64": 8, "BOOL": 1}


class LoadError(RuntimeError):
    """The fuel cannot be loaded as the reference model; the message says why."""


def log(msg: str) -> None:
    print(f"[hf_load] {msg}", flush=True)


def shout(msg: str) -> None:
    bar = "!" * 100
    print(f"{bar}\n[hf_load] {msg}\n{bar}", flush=True)


def _short_list(keys, n: int = 12) -> str:
    keys = sorted(str(k) for k in keys)
    head = ", ".join(keys[:n])
    return f"{len(keys)} [{head}{', ...' if len(keys) > n else ''}]"


# --------------------------------------------------------------------------------------------
# Fuel inventory (no torch needed)
# --------------------------------------------------------------------------------------------

def read_safetensors_header(path: str) -> dict:
    with open(path, "rb") as f:
        raw = f.read(8)
        if len(raw) != 8:
            raise LoadError(f"{path}: shorter than a safetensors header")
        (n,) = struct.unpack("<Q", raw)
        if n <= 0 or n > 512 * 1024 * 1024:
            raise LoadError(f"{path}: implausible safetensors header length {n}")
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    return header


def shard_files(fuel_dir: str):
    """Returns (files, weight_map or None): the safetensors files the checkpoint consists of."""
    index = os.path.join(fuel_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise LoadError(f"{index}: no weight_map")
        files = sorted(set(weight_map.values()))
        for fn in files:
            if not os.path.exists(os.path.join(fuel_dir, fn)):
                raise LoadError(f"{index} names {fn}, which does not exist")
        return files, weight_map
    if os.path.exists(os.path.join(fuel_dir, "model.safetensors")):
        return ["model.safetensors"], None
    files = sorted(fn for fn in os.listdir(fuel_dir) if fn.endswith(".safetensors"))
    if not files:
        raise LoadError(f"{fuel_dir}: no safetensors files")
    return files, None


def inspect_fuel(fuel_dir: str) -> dict:
    """Config, shard files and every tensor's dtype/shape/file, read from the headers only."""
    fuel_dir = os.path.abspath(fuel_dir)
    cfg_path = os.path.join(fuel_dir, "config.json")
    if not os.path.exists(cfg_path):
        raise LoadError(f"{fuel_dir}: no config.json")
    with open(cfg_path) as f:
        config = json.load(f)
    files, weight_map = shard_files(fuel_dir)
    tensors = {}
    for fn in files:
        for name, meta in read_safetensors_header(os.path.join(fuel_dir, fn)).items():
            if name in tensors:
                raise LoadError(f"tensor {name} is in both {tensors[name]['file']} and {fn}")
            tensors[name] = {"dtype": meta["dtype"], "shape": list(meta["shape"]), "file": fn}
    problems = []
    if weight_map is not None:
        for name, fn in weight_map.items():
            if name not in tensors:
                problems.append(f"index names {name} ({fn}) but no shard holds it")
            elif tensors[name]["file"] != fn:
                problems.append(f"index puts {name} in {fn}, it is in {tensors[name]['file']}")
        for name in tensors:
            if name not in weight_map:
                problems.append(f"{name} is in {tensors[name]['file']} but not in the index")
    if problems:
        raise LoadError("model.safetensors.index.json disagrees with the shards: " + "; ".join(problems[:10]))

    names = set(tensors)
    if any(n.endswith(".weight_scale_inv") for n in names):
        fmt = "fp8"
    elif any(n.endswith(".weight_scale_2") for n in names) or any(
            tensors[n]["dtype"] == "U8" and n.endswith(".weight") for n in names):
        fmt = "nvfp4"
    else:
        fmt = "bf16"
    dtype_counts = collections.Counter(t["dtype"] for t in tensors.values())
    nbytes = sum(ST_DTYPE_SIZE.get(t["dtype"], 0) * math.prod(t["shape"]) for t in tensors.values())
    return {
        "dir": fuel_dir,
        "name": os.path.basename(fuel_dir.rstrip("/")),
        "config": config,
        "files": files,
        "tensors": tensors,
        "format": fmt,
        "dtype_counts": dict(dtype_counts),
        "tensor_bytes": nbytes,
        "n_expert_tensors": sum(1 for n in names if EXPERT_RE.match(n)),
    }


def describe_fuel(info: dict) -> str:
    c = info["config"]
    lines = [
        f"fuel {info['dir']}",
        f"  format {info['format']}, {len(info['tensors'])} tensors in {len(info['files'])} shard(s), "
        f"{info['tensor_bytes'] / 1e9:.3f} GB, dtypes {info['dtype_counts']}",
        f"  architectures {c.get('architectures')} model_type {c.get('model_type')} "
        f"layers {c.get('num_hidden_layers')} hidden {c.get('hidden_size')} vocab {c.get('vocab_size')} "
        f"experts {c.get('num_experts')} top-{c.get('num_experts_per_tok')}",
        f"  per-expert tensors {info['n_expert_tensors']}; quantization_config {c.get('quantization_config')}",
    ]
    return "\n".join(lines)


def fuel_checksums(info: dict) -> dict:
    """sha256 of config.json and every shard: ties a golden file to the exact fuel bytes."""
    import hashlib
    out = {}
    for fn in ["config.json"] + list(info["files"]):
        h = hashlib.sha256()
        with open(os.path.join(info["dir"], fn), "rb") as f:
            while True:
                block = f.read(16 * 1024 * 1024)
                if not block:
                    break
                h.update(block)
        out[fn] = h.hexdigest()
    return out


# --------------------------------------------------------------------------------------------
# Reading and dequantising tensors
# --------------------------------------------------------------------------------------------

def _torch():
    import torch
    return torch


def _st_torch_dtype(name: str):
    torch = _torch()
    table = {"BF16": torch.bfloat16, "F16": torch.float16, "F32": torch.float32, "F64": torch.float64,
             "U8": torch.uint8, "I8": torch.int8, "I16": torch.int16, "I32": torch.int32, "I64": torch.int64,
             "BOOL": torch.bool}
    if name == "F8_E4M3":
        if not hasattr(torch, "float8_e4m3fn"):
            raise LoadError("this torch has no float8_e4m3fn")
        return torch.float8_e4m3fn
    if name not in table:
        raise LoadError(f"unsupported safetensors dtype {name}")
    return table[name]


def load_shard(path: str) -> dict:
    """All tensors of one safetensors file on the CPU (safetensors.torch, or a plain reader)."""
    try:
        from safetensors.torch import load_file
    except ImportError:
        load_file = None
    if load_file is not None:
        return load_file(path, device="cpu")
    torch = _torch()
    header = read_safetensors_header(path)
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        f.seek(8 + n)  # data offsets count from the end of the header
        data = bytearray(f.read())
    out = {}
    for name, meta in header.items():
        b, e = meta["data_offsets"]
        dt = _st_torch_dtype(meta["dtype"])
        t = torch.frombuffer(data[b:e], dtype=dt) if e > b else torch.empty(0, dtype=dt)
        out[name] = t.reshape(meta["shape"]).clone()
    return out


def _f32(t):
    return t.to(_torch().float32)


def dequant_fp8_block(weight, scale_inv, block=(128, 128)):
    """Block FP8: w[r, c] = e4m3[r, c] * scale_inv[r // 128, c // 128] (DeepSeek/Qwen layout)."""
    if weight.dim() != 2:
        raise LoadError(f"FP8 weight of rank {weight.dim()} (only 2-D per-tensor weights are supported)")
    rows, cols = weight.shape
    br, bc = block
    want = (math.ceil(rows / br), math.ceil(cols / bc))
    s = _f32(scale_inv)
    if tuple(s.shape) != want:
        raise LoadError(f"FP8 weight_scale_inv shape {tuple(s.shape)}, expected {want} for weight {rows}x{cols}")
    s_full = s.repeat_interleave(br, dim=0)[:rows].repeat_interleave(bc, dim=1)[:, :cols]
    return _f32(weight) * s_full


def dequant_nvfp4(packed, scale, scale_2, group: int = 16):
    """ModelOpt NVFP4: two e2m1 per byte, element 2j in the low nibble, element 2j+1 in the high one;
    w[r, c] = e2m1[r, c] * e4m3 weight_scale[r, c // 16] * weight_scale_2."""
    torch = _torch()
    if packed.dim() != 2 or packed.dtype != torch.uint8:
        raise LoadError(f"NVFP4 weight must be 2-D uint8, got {packed.dtype} {tuple(packed.shape)}")
    rows, half = packed.shape
    cols = 2 * half
    lo = (packed & 0x0F).long()
    hi = (packed >> 4).long()
    codes = torch.stack([lo, hi], dim=-1).reshape(rows, cols)
    values = torch.tensor(E2M1_VALUES, dtype=torch.float32)[codes]
    s = _f32(scale)
    if tuple(s.shape) != (rows, cols // group):
        raise LoadError(f"NVFP4 weight_scale shape {tuple(s.shape)}, expected {(rows, cols // group)}")
    s2 = _f32(scale_2).reshape(-1)
    if s2.numel() != 1:
        raise LoadError(f"NVFP4 weight_scale_2 has {s2.numel()} elements, expected 1")
    return values * s.repeat_interleave(group, dim=1) * s2[0]


def normalize_name(name: str) -> str:
    """Multimodal checkpoints keep the text model under model.language_model.; the CausalLM under model."""
    if name.startswith("model.language_model."):
        return "model." + name[len("model.language_model."):]
    return name


def load_logical_tensors(info: dict, dequant: bool, notes: dict) -> dict:
    """Every checkpoint tensor by (normalised) name, quantised weights dequantised to FP32 and their
    scale tensors consumed. Parts the CausalLM does not have (mtp., visual) are set aside."""
    raw = {}
    for fn in info["files"]:
        raw.update(load_shard(os.path.join(info["dir"], fn)))
    qc = info["config"].get("quantization_config") or {}
    block = tuple(qc.get("weight_block_size") or (128, 128))
    logical, ignored, consumed = {}, [], set()
    n_fp8 = n_nvfp4 = 0
    for name in list(raw):
        if name.startswith(IGNORED_PREFIXES):
            ignored.append(name)
            raw.pop(name)
            continue
        if name.endswith(QUANT_SUFFIXES):
            continue
        t = raw[name]
        base = name[: -len(".weight")] if name.endswith(".weight") else None
        if base is not None and base + ".weight_scale_inv" in raw:
            if not dequant:
                raise LoadError(f"{name} is block-FP8; this load path needs dequantisation")
            t = dequant_fp8_block(t, raw[base + ".weight_scale_inv"], block)
            consumed.add(base + ".weight_scale_inv")
            n_fp8 += 1
        elif base is not None and base + ".weight_scale" in raw and base + ".weight_scale_2" in raw:
            if not dequant:
                raise LoadError(f"{name} is NVFP4; this load path needs dequantisation")
            t = dequant_nvfp4(t, raw[base + ".weight_scale"], raw[base + ".weight_scale_2"])
            consumed.update({base + ".weight_scale", base + ".weight_scale_2"})
            if base + ".input_scale" in raw:
                consumed.add(base + ".input_scale")  # activation scale: unused by a weight-only reference
            n_nvfp4 += 1
        key = normalize_name(name)
        if key in logical:
            raise LoadError(f"{name} and another tensor both map to {key}")
        logical[key] = t
        raw.pop(name)
    orphans = [n for n in raw if n.endswith(QUANT_SUFFIXES) and n not in consumed]
    if orphans:
        raise LoadError("scale tensors with no matching quantised weight: " + _short_list(orphans))
    notes["ignored_checkpoint_tensors"] = sorted(ignored)
    notes["dequantised"] = {"fp8_block": n_fp8, "nvfp4": n_nvfp4, "fp8_block_size": list(block)}
    return logical


def experts_transposed(model) -> bool:
    """transformers marks expert modules that store [E, H, 2I] instead of [E, 2I, H]."""
    for m in model.modules():
        if hasattr(m, "gate_up_proj") and getattr(m, "is_transposed", False):
            return True
    return False


def map_to_model(logical: dict, model_shapes: dict, transposed: bool, notes: dict) -> dict:
    """The state dict the model wants, built from checkpoint tensors: direct names, or per-expert
    tensors fused as transformers stores them. Strict both ways: a model key nothing provides, or a
    checkpoint tensor nothing uses, is a LoadError. Consumes `logical`."""
    torch = _torch()
    out, missing, bad_shapes, used = {}, [], [], set()
    n_fused = 0
    for key, shape in model_shapes.items():
        shape = tuple(shape)
        if key in logical:
            t = logical[key]
            if tuple(t.shape) != shape:
                bad_shapes.append(f"{key}: checkpoint {tuple(t.shape)} model {shape}")
            out[key] = t
            used.add(key)
            continue
        m = FUSED_RE.match(key)
        if m is None:
            missing.append(key)
            continue
        prefix, which = m.group("prefix"), m.group("which")
        n_experts = shape[0]
        projs = ("gate_proj", "up_proj") if which == "gate_up_proj" else ("down_proj",)
        names = [[f"{prefix}.{e}.{p}.weight" for e in range(n_experts)] for p in projs]
        absent = [n for group in names for n in group if n not in logical]
        if absent:
            missing.append(f"{key} (needs {_short_list(absent, 4)})")
            continue
        parts = [torch.stack([logical[n] for n in group]) for group in names]  # each [E, out, in]
        fused = torch.cat(parts, dim=1) if len(parts) == 2 else parts[0]      # gate rows first, then up
        if transposed:
            fused = fused.transpose(1, 2).contiguous()
        if tuple(fused.shape) != shape:
            bad_shapes.append(f"{key}: fused {tuple(fused.shape)} model {shape}")
        out[key] = fused
        for group in names:
            for n in group:
                used.add(n)
                logical[n] = None  # free the per-expert copy as soon as it is fused
        n_fused += 1
    unused = [k for k in logical if k not in used]
    problems = []
    if missing:
        problems.append("model keys the checkpoint does not provide: " + _short_list(missing))
    if unused:
        problems.append("checkpoint tensors the model has no place for: " + _short_list(unused))
    if bad_shapes:
        problems.append("shape mismatches: " + "; ".join(bad_shapes[:10]))
    if problems:
        raise LoadError(" | ".join(problems))
    notes["fused_expert_params"] = n_fused
    return out


def expected_state_dict(model, info: dict, dequant: bool, notes: dict) -> dict:
    shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    logical = load_logical_tensors(info, dequant, notes)
    return map_to_model(logical, shapes, experts_transposed(model), notes)


def verify_against_checkpoint(model, expected: dict) -> dict:
    """Bitwise comparison of every model tensor with the checkpoint value cast to the model's dtype."""
    torch = _torch()
    sd = model.state_dict()
    mismatches, checked, worst = [], 0, 0.0
    with torch.no_grad():
        for key, want in expected.items():
            have = sd[key]
            want = want.to(device=have.device, dtype=have.dtype)
            checked += 1
            if not torch.equal(have, want):
                diff = (have.float() - want.float()).abs()
                d = float(diff.max()) if diff.numel() else 0.0
                worst = max(worst, d)
                first = int(torch.nonzero(diff.reshape(-1) > 0)[0]) if d > 0 else -1
                mismatches.append(f"{key} max|diff| {d:.3g} first flat index {first}")
    return {"checked": checked, "mismatched": len(mismatches), "max_abs_diff": worst, "examples": mismatches[:10]}


# --------------------------------------------------------------------------------------------
# Model construction
# --------------------------------------------------------------------------------------------

def _model_class():
    try:
        from transformers import Qwen3_5MoeForCausalLM
    except ImportError as e:
        raise LoadError(f"this transformers has no Qwen3_5MoeForCausalLM ({e})") from e
    return Qwen3_5MoeForCausalLM


def _patched_dir(fuel_dir: str, patch) -> str:
    """A temp dir whose files link to the fuel's, with config.json rewritten by patch(dict)."""
    tmp = tempfile.mkdtemp(prefix="rocket_fuel_")
    for fn in os.listdir(fuel_dir):
        if fn != "config.json":
            os.symlink(os.path.join(fuel_dir, fn), os.path.join(tmp, fn))
    with open(os.path.join(fuel_dir, "config.json")) as f:
        cfg = json.load(f)
    patch(cfg)
    with open(os.path.join(tmp, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    return tmp


def _from_pretrained(path: str, **kwargs):
    """from_pretrained asking for eager experts; retried without that argument where unknown."""
    cls = _model_class()
    base = dict(local_files_only=True, output_loading_info=True, **kwargs)
    try:
        return cls.from_pretrained(path, experts_implementation="eager", **base)
    except Exception as e:  # noqa: BLE001 - an older signature, or a real failure re-raised below
        if "experts_implementation" not in str(e):
            raise
        log(f"from_pretrained rejects experts_implementation ({e}); retrying without it")
        return cls.from_pretrained(path, **base)


def _from_config(fuel_dir: str, dtype, device: str):
    """An initialised model on `device` from the fuel's config (quantization_config dropped)."""
    torch = _torch()
    from transformers import AutoConfig
    tmp = _patched_dir(fuel_dir, lambda c: c.pop("quantization_config", None))
    try:
        config = AutoConfig.from_pretrained(tmp, local_files_only=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    cls = _model_class()
    with torch.device(device):
        try:
            model = cls._from_config(config, attn_implementation="eager", dtype=dtype)
        except TypeError:
            model = cls._from_config(config, attn_implementation="eager", torch_dtype=dtype)
    model = model.to(device)
    # NOTE: cast parameters only. Buffers such as the rotary inv_freq stay FP32, as from_pretrained
    # leaves them; model.to(bfloat16) would round them.
    with torch.no_grad():
        for p in model.parameters():
            if p.is_floating_point() and p.dtype != dtype:
                p.data = p.data.to(dtype)
    return model


def _loading_info_dict(info) -> dict:
    """from_pretrained's loading info (a dict, or transformers 5's LoadStateDictInfo) as plain lists."""
    if not isinstance(info, dict):
        fields = ("missing_keys", "unexpected_keys", "mismatched_keys", "error_msgs", "conversion_errors")
        as_dict = {f: getattr(info, f) for f in fields if hasattr(info, f)}
        if not as_dict:
            raise LoadError(f"unrecognised loading info from from_pretrained: {type(info).__name__}")
        info = as_dict
    out = {}
    if isinstance(info, dict):
        for k, v in info.items():
            if isinstance(v, (set, list, tuple)):
                out[k] = sorted((str(x) for x in v))
            elif isinstance(v, dict):
                out[k] = {str(a): str(b) for a, b in v.items()}
            else:
                out[k] = str(v)
    return out


def _is_expert_key(k: str) -> bool:
    return ".mlp.experts." in k or k.endswith(".mlp.experts")


PROBLEM_FIELDS = ("missing", "unexpected", "mismatch", "error")


def classify_loading_info(li: dict):
    """(expert-related problems, other problems) from from_pretrained's loading info. Fields that
    are not about missing, unexpected or mismatched keys or errors are informational."""
    expert, other = {}, {}
    for field, entries in li.items():
        if not entries or not any(w in field.lower() for w in PROBLEM_FIELDS):
            continue
        if isinstance(entries, dict):
            entries = [f"{a}: {b}" for a, b in entries.items()]
        if isinstance(entries, str):
            entries = [entries]
        e = [x for x in entries if _is_expert_key(x)]
        o = [x for x in entries if not _is_expert_key(x)]
        if e:
            expert[field] = e
        if o:
            other[field] = o
    return expert, other


def force_eager(model, report: dict) -> None:
    """Plain PyTorch attention and expert loops: the simplest path, and the one the modeling file
    spells out."""
    for fn, arg in (("set_attn_implementation", "eager"), ("set_experts_implementation", "eager")):
        if hasattr(model, fn):
            try:
                getattr(model, fn)(arg)
            except Exception as e:  # noqa: BLE001 - reported, the attribute check below decides
                log(f"{fn}('{arg}') failed: {e}")
    seen = set()
    for m in model.modules():
        cfg = getattr(m, "config", None)
        if cfg is None or id(cfg) in seen:
            continue
        seen.add(id(cfg))
        if hasattr(cfg, "_experts_implementation") and cfg._experts_implementation != "eager":
            try:
                cfg._experts_implementation = "eager"
            except Exception as e:  # noqa: BLE001
                log(f"could not set _experts_implementation: {e}")
    report["attn_implementation"] = str(getattr(model.config, "_attn_implementation", None))
    report["experts_implementation"] = str(getattr(model.config, "_experts_implementation", "n/a"))
    if report["attn_implementation"] in ("sdpa", "flash_attention_2", "flash_attention_3", "flex_attention"):
        raise LoadError(f"attention implementation is {report['attn_implementation']}, wanted eager")
    if report["attn_implementation"] != "eager":
        log(f"warning: attention implementation reads {report['attn_implementation']!r}, not 'eager'")


def check_untied(model, report: dict) -> None:
    torch = _torch()
    emb = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    tied = emb.data_ptr() == head.data_ptr()
    equal = bool(tied or (emb.shape == head.shape and torch.equal(emb, head)))
    report["lm_head_tied"] = tied
    if model.config.tie_word_embeddings is False and equal:
        raise LoadError("tie_word_embeddings is false but lm_head.weight equals embed_tokens.weight")


def load_model(fuel_dir: str, dtype, device: str, quant: str = "auto", verify: bool = True,
               tokenizer_dir: str | None = None):
    """Returns (model, tokenizer or None, report). Raises LoadError on anything the reference cannot
    stand behind. `dtype` is the compute dtype (weights are upcast exactly from BF16). The tokenizer
    comes from the fuel, or from `tokenizer_dir` when the fuel has no tokenizer.json."""
    torch = _torch()
    import transformers
    t0 = time.time()
    info = inspect_fuel(fuel_dir)
    log(describe_fuel(info))
    report = {
        "fuel_dir": info["dir"], "format": info["format"], "n_tensors": len(info["tensors"]),
        "dtype": str(dtype).replace("torch.", ""), "device": device,
        "transformers": transformers.__version__, "torch": torch.__version__,
        "quantization_config": info["config"].get("quantization_config"),
    }
    fmt = info["format"]
    if quant == "auto":
        quant = "hf" if fmt == "bf16" else "manual"
    if fmt == "bf16" and quant != "hf":
        raise LoadError(f"quant={quant} applies to quantised fuels; this one is bf16")
    if fmt != "fp8" and quant == "hf_dequant":
        raise LoadError("hf_dequant is the FineGrainedFP8 path; this fuel is " + fmt)

    if fmt == "bf16":
        model = _load_plain(info, dtype, device, report)
        dequant = False
    elif quant == "manual":
        model = _from_config(info["dir"], dtype, device)
        report["loading_path"] = "manual_dequant"
        dequant = True
    else:
        model = _load_hf_quantised(info, dtype, device, quant, report)
        verify = False  # quantised parameters are not comparable tensor by tensor
        dequant = False

    if verify or report.get("loading_path") in ("manual_fuse", "manual_dequant"):
        notes = {}
        expected = expected_state_dict(model, info, dequant, notes)
        report.update(notes)
        if report["loading_path"] in ("manual_fuse", "manual_dequant"):
            try:
                model.load_state_dict(expected, strict=True)
            except RuntimeError as e:
                raise LoadError(f"load_state_dict(strict=True) failed: {e}") from e
        if verify:
            v = verify_against_checkpoint(model, expected)
            report["verify"] = v
            log(f"verify: {v['checked']} tensors compared with the checkpoint, {v['mismatched']} differ")
            if v["mismatched"]:
                raise LoadError("model tensors differ from the checkpoint: " + "; ".join(v["examples"]))
        del expected

    model.eval()
    force_eager(model, report)
    check_untied(model, report)
    report["param_count"] = int(sum(p.numel() for p in model.parameters()))
    report["load_seconds"] = round(time.time() - t0, 2)
    tok_dir = info["dir"]
    if tokenizer_dir and not os.path.exists(os.path.join(tok_dir, "tokenizer.json")):
        log(f"the fuel has no tokenizer.json; using {tokenizer_dir}")
        tok_dir = tokenizer_dir
    report["tokenizer_dir"] = tok_dir
    tok = load_tokenizer(tok_dir, report)
    log(f"loaded via {report['loading_path']} in {report['load_seconds']} s: {report['param_count']:,} parameters, "
        f"{report['dtype']} on {device}, attn {report['attn_implementation']}, "
        f"experts {report['experts_implementation']}")
    return model, tok, report


def hf_conversion_mapping(model_type):
    """What transformers registers for converting this model type's checkpoint keys (informational)."""
    try:
        from transformers.conversion_mapping import get_checkpoint_conversion_mapping
    except ImportError as e:
        return f"no transformers.conversion_mapping ({e})"
    try:
        conv = get_checkpoint_conversion_mapping(model_type)
    except Exception as e:  # noqa: BLE001
        return f"lookup failed: {type(e).__name__}: {e}"
    if conv is None:
        return "none registered"
    out = []
    for c in conv:
        src = getattr(c, "source_patterns", getattr(c, "source_keys", "?"))
        dst = getattr(c, "target_patterns", getattr(c, "target_keys", "?"))
        out.append(f"{type(c).__name__}({src} -> {dst})")
    return out


def _load_plain(info: dict, dtype, device: str, report: dict):
    """BF16 fuel: from_pretrained, with the per-expert fallback described at the top."""
    kwargs = dict(dtype=dtype, attn_implementation="eager")
    if device.startswith("cuda"):
        kwargs["device_map"] = {"": device}
    report["hf_conversion_mapping"] = hf_conversion_mapping(info["config"].get("model_type"))
    log(f"transformers conversion mapping for {info['config'].get('model_type')}: {report['hf_conversion_mapping']}")
    model = None
    try:
        model, li = _from_pretrained(info["dir"], **kwargs)
        li = _loading_info_dict(li)
        report["from_pretrained"] = {"ok": True, "loading_info": li}
    except Exception as e:  # noqa: BLE001 - reported; the manual path decides
        traceback.print_exc()
        report["from_pretrained"] = {"ok": False, "error": f"{type(e).__name__}: {e}"}
        shout(f"from_pretrained raised {type(e).__name__}: {e}\n"
              "[hf_load] building the model from config and loading the checkpoint manually instead")
    if model is None:
        report["loading_path"] = "manual_fuse"
        return _from_config(info["dir"], dtype, device)

    expert, other = classify_loading_info(li)
    for field, entries in li.items():
        if entries:
            log(f"loading info {field}: {_short_list(entries) if isinstance(entries, list) else entries}")
    if other:
        raise LoadError("the checkpoint layout is not what transformers expects: " +
                        "; ".join(f"{f}: {_short_list(v)}" for f, v in other.items()))
    if expert:
        shout("HF did not map per-expert tensors: " +
              "; ".join(f"{f}: {_short_list(v, 6)}" for f, v in expert.items()) +
              "\n[hf_load] fusing experts here and loading with load_state_dict(strict=True)")
        report["hf_expert_problems"] = expert
        report["loading_path"] = "manual_fuse"
    else:
        report["loading_path"] = "from_pretrained"
    return model


def _linear_modules_kept_high(info: dict) -> list:
    """Modules whose weight the FP8 fuel stores unquantised (for modules_to_not_convert)."""
    keep = set()
    for name, t in info["tensors"].items():
        if name.endswith(".weight") and len(t["shape"]) == 2 and t["dtype"] != "F8_E4M3":
            keep.add(normalize_name(name)[: -len(".weight")])
    return sorted(keep)


def _load_hf_quantised(info: dict, dtype, device: str, quant: str, report: dict):
    """transformers' own quantised loading (hf), or FineGrainedFP8 with dequantize=True (hf_dequant)."""
    if not device.startswith("cuda"):
        raise LoadError("transformers' quantised loaders need a CUDA device")
    kwargs = dict(dtype=dtype, attn_implementation="eager", device_map={"": device})
    path, tmp = info["dir"], None
    if quant == "hf_dequant":
        qc = dict(info["config"].get("quantization_config") or {})
        keep = _linear_modules_kept_high(info)

        def patch(cfg):
            q = dict(qc)
            q["quant_method"] = "fp8"
            q.setdefault("weight_block_size", [128, 128])
            q.setdefault("activation_scheme", "dynamic")
            q["dequantize"] = True
            q["modules_to_not_convert"] = sorted(set(q.get("modules_to_not_convert") or []) | set(keep) | {"lm_head"})
            cfg["quantization_config"] = q

        tmp = _patched_dir(info["dir"], patch)
        path = tmp
        report["patched_quantization_config"] = "fp8 dequantize=True, modules_to_not_convert from the fuel's bf16 tensors"
        if not (info["config"].get("quantization_config") or {}).get("modules_to_not_convert"):
            log("note: the fuel's quantization_config lists no modules_to_not_convert although "
                f"{len(keep)} linear weights are stored unquantised")
    try:
        model, li = _from_pretrained(path, **kwargs)
    except Exception as e:  # noqa: BLE001
        raise LoadError(f"transformers could not load this {info['format']} fuel ({quant}): "
                        f"{type(e).__name__}: {e}") from e
    finally:
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)
    li = _loading_info_dict(li)
    report["from_pretrained"] = {"ok": True, "loading_info": li}
    expert, other = classify_loading_info(li)
    problems = {**{f"expert {k}": v for k, v in expert.items()}, **other}
    if problems:
        raise LoadError(f"transformers loaded the {info['format']} fuel ({quant}) with key problems: " +
                        "; ".join(f"{f}: {_short_list(v)}" for f, v in problems.items()))
    report["loading_path"] = "hf_native_quant" if quant == "hf" else "hf_fp8_dequant"
    report["quantizer"] = type(getattr(model, "hf_quantizer", None)).__name__
    return model


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------

class Tokenizer:
    """encode(text) -> ids with no special tokens added; decode(ids) -> text (None if it fails)."""

    def __init__(self, kind: str, impl, raw=None):
        self.kind, self._impl, self._raw = kind, impl, raw

    def encode(self, text: str) -> list:
        if self.kind == "AutoTokenizer":
            return list(self._impl.encode(text, add_special_tokens=False))
        return list(self._impl.encode(text, add_special_tokens=False).ids)

    def encode_raw(self, text: str):
        """The same text through tokenizer.json alone, when both are loaded (a cross-check)."""
        if self._raw is None:
            return None
        return list(self._raw.encode(text, add_special_tokens=False).ids)

    def decode(self, ids):
        try:
            return self._impl.decode(list(ids))
        except Exception:  # noqa: BLE001 - ids beyond the tokenizer's vocab (model vocab is larger)
            return None


def load_tokenizer(fuel_dir: str, report: dict):
    raw = None
    tj = os.path.join(fuel_dir, "tokenizer.json")
    if os.path.exists(tj):
        try:
            from tokenizers import Tokenizer as RawTokenizer
            raw = RawTokenizer.from_file(tj)
        except Exception as e:  # noqa: BLE001
            log(f"tokenizers could not read {tj}: {e}")
    try:
        from transformers import AutoTokenizer
        tok = Tokenizer("AutoTokenizer", AutoTokenizer.from_pretrained(fuel_dir, local_files_only=True), raw)
    except Exception as e:  # noqa: BLE001
        log(f"AutoTokenizer failed on {fuel_dir}: {type(e).__name__}: {e}")
        tok = Tokenizer("tokenizers.Tokenizer", raw) if raw is not None else None
    report["tokenizer"] = tok.kind if tok else None
    if tok is None:
        log("no tokenizer: prompts cannot be encoded")
    return tok


# --------------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Print a fuel's inventory (headers only; no torch needed).")
    ap.add_argument("--fuel", required=True)
    ap.add_argument("--checksums", action="store_true", help="also sha256 every file")
    args = ap.parse_args(argv)
    try:
        info = inspect_fuel(args.fuel)
    except LoadError as e:
        print(f"[hf_load] FAILED: {e}", file=sys.stderr)
        return 1
    print(describe_fuel(info))
    if args.checksums:
        for fn, h in fuel_checksums(info).items():
            print(f"  {h}  {fn}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
