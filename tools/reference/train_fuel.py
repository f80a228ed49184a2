"""Trains the `english` fuel: a small qwen3_5_moe checkpoint that writes English, with its MTP layer.

    python3 train_fuel.py --corpus DIR --qwen-tokenizer DIR --out DIR [--seed 0] [--steps N]

The model is HF's own `Qwen3_5MoeForCausalLM` (the definition of correct), so the checkpoint is valid
by construction; the loader's check (`hf_load.py`) and the goldens (`golden.py`) run on what this
writes. Steps, in order:

 1. Tokenizer: a byte-level BPE of --bpe-vocab tokens trained on the training split, with Qwen's own
    normaliser, pre-tokeniser regex and decoder (its tokenizer.json with the vocabulary and merges
    replaced), and Qwen's added tokens (<|endoftext|>, <|im_start|>, <think>, <tool_call>, ...) after
    the BPE ids. tokenizer_config.json is Qwen's (the chat template) with those ids.
 2. Data: the training samples as plain text, each ended by <|endoftext|>, and as one-turn chats
    (the user gives one to three sentences of a paragraph, the assistant continues it, in the chat
    template's no-thinking form), packed into one stream and cut into random windows.
 3. Training: AdamW, warm-up then cosine, BF16 autocast, the router's load-balancing loss. The held-out
    split is evaluated every --eval-every steps and the best step's weights are kept.
 4. MTP: one draft layer as Qwen3.5 releases store it under `mtp.` (pre_fc_norm_embedding,
    pre_fc_norm_hidden, fc over [normed embedding of token t+1, normed final hidden state at t],
    layers.0 = a full-attention decoder layer with the MoE block, norm; the main model's embedding
    and LM head). Row t predicts token t+2 at position t. It trains beside the model on detached
    inputs, so the main model is the one a run without it would make.
 5. Output: config.json, generation_config.json, model.safetensors (BF16, per-expert tensors as the
    forge writes them), the tokenizer files, heldout.txt (the held-out samples as text, for
    `rocket gate`), train_report.json (every eval, the BF16 noise floor, the samples, the times).

Deterministic for a given --seed and --steps on the same GPU and library versions (deterministic
algorithms on); --time-limit stops early and says so in the report, which then is not that run.
"""
from __future__ import annotations

import argparse
import copy
import json
import math
import os
import random
import sys
import time

os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

CHAT_FRACTION = 0.3  # of the training samples' paragraphs, also given as a one-turn chat
T0 = time.time()


def log(msg: str) -> None:
    print(f"[train {time.time() - T0:7.1f}s] {msg}", flush=True)


def read_jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def paragraph_text(p: list[str]) -> str:
    return " ".join(p)


def sample_text(doc: dict) -> str:
    return "\n\n".join(paragraph_text(p) for p in doc["paragraphs"])


# ---------------------------------------------------------------------------------------------
# 1. Tokenizer
# ---------------------------------------------------------------------------------------------

def train_tokenizer(qwen_dir: str, docs: list[dict], bpe_vocab: int, out_dir: str) -> dict:
    from tokenizers import Tokenizer, trainers, pre_tokenizers

    with open(os.path.join(qwen_dir, "tokenizer.json"), encoding="utf-8") as f:
        qwen = json.load(f)
    with open(os.path.join(qwen_dir, "tokenizer_config.json"), encoding="utf-8") as f:
        qwen_config = json.load(f)
    blank = copy.deepcopy(qwen)
    blank["model"]["vocab"] = {}
    blank["model"]["merges"] = []
    blank["added_tokens"] = []
    tk = Tokenizer.from_str(json.dumps(blank))
    trainer = trainers.BpeTrainer(vocab_size=bpe_vocab, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tk.train_from_iterator((paragraph_text(p) for d in docs for p in d["paragraphs"]), trainer=trainer)
    trained = json.loads(tk.to_str())["model"]
    vocab = trained["vocab"]
    out = copy.deepcopy(qwen)
    out["model"]["vocab"] = vocab
    out["model"]["merges"] = trained["merges"]
    n = len(vocab)
    remap = {}
    added = []
    for i, t in enumerate(sorted(qwen["added_tokens"], key=lambda t: t["id"])):
        remap[str(t["id"])] = n + i
        added.append(dict(t, id=n + i))
    out["added_tokens"] = added
    config = copy.deepcopy(qwen_config)
    config["added_tokens_decoder"] = {str(remap[k]): v for k, v in qwen_config["added_tokens_decoder"].items()}
    config["model_max_length"] = 4096
    with open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(out, f, ensure_ascii=False, indent=1)
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w", encoding="utf-8") as f:
        json.dump(config, f, ensure_ascii=False, indent=2)
    ids = {t["content"]: t["id"] for t in added}
    log(f"tokenizer: {n} BPE tokens + {len(added)} added ({min(ids.values())}..{max(ids.values())}), "
        f"{len(trained['merges'])} merges")
    return ids


# ---------------------------------------------------------------------------------------------
# 2. Data
# ---------------------------------------------------------------------------------------------

def chat_text(user: str, answer: str) -> str:
    # The chat template's one-turn form with add_generation_prompt and enable_thinking=false, which
    # is also what the template renders for a finished last assistant turn without reasoning.
    return f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n{answer}<|im_end|>\n"


def token_stream(tk, docs: list[dict], rng: random.Random, chats: bool) -> list[int]:
    texts = []
    for d in docs:
        texts.append(sample_text(d) + "<|endoftext|>")
        if not chats:
            continue
        for p in d["paragraphs"]:
            if len(p) < 2 or rng.random() >= CHAT_FRACTION:
                continue
            cut = rng.randint(1, min(3, len(p) - 1))
            texts.append(chat_text(" ".join(p[:cut]), " ".join(p[cut:cut + 3])))
    rng.shuffle(texts)
    stream: list[int] = []
    for enc in tk.encode_batch(texts, add_special_tokens=False):
        stream.extend(enc.ids)
    return stream


# ---------------------------------------------------------------------------------------------
# 3/4. Model and MTP layer
# ---------------------------------------------------------------------------------------------

def model_config(ids: dict, vocab: int) -> dict:
    layers = 4
    return {
        "architectures": ["Qwen3_5MoeForCausalLM"], "model_type": "qwen3_5_moe_text",
        "vocab_size": vocab, "hidden_size": 256, "num_hidden_layers": layers,
        "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
        "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 64,
        "linear_value_head_dim": 64, "linear_conv_kernel_dim": 4,
        "num_experts": 16, "num_experts_per_tok": 4, "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 128, "max_position_embeddings": 4096,
        "layer_types": ["linear_attention" if (i + 1) % 4 else "full_attention" for i in range(layers)],
        "hidden_act": "silu", "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "attention_bias": False,
        "attention_dropout": 0.0, "initializer_range": 0.02, "dtype": "bfloat16",
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25},
        "bos_token_id": ids["<|endoftext|>"], "eos_token_id": ids["<|im_end|>"],
        "pad_token_id": ids["<|endoftext|>"], "use_cache": True, "mtp_num_hidden_layers": 1,
    }


def build_mtp(torch, mod, model):
    config = model.config
    h = config.hidden_size

    class MTP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.pre_fc_norm_embedding = mod.Qwen3_5MoeRMSNorm(h, eps=config.rms_norm_eps)
            self.pre_fc_norm_hidden = mod.Qwen3_5MoeRMSNorm(h, eps=config.rms_norm_eps)
            self.fc = torch.nn.Linear(2 * h, h, bias=False)
            self.layers = torch.nn.ModuleList(
                [mod.Qwen3_5MoeDecoderLayer(config, config.layer_types.index("full_attention"))])
            self.norm = mod.Qwen3_5MoeRMSNorm(h, eps=config.rms_norm_eps)

        def forward(self, next_embeds, hidden, position_embeddings, mask):
            x = self.fc(torch.cat([self.pre_fc_norm_embedding(next_embeds), self.pre_fc_norm_hidden(hidden)], -1))
            x = self.layers[0](x, position_embeddings=position_embeddings, attention_mask=mask)
            if isinstance(x, tuple):
                x = x[0]
            return self.norm(x)

    mtp = MTP()
    for m in mtp.modules():  # as post_init starts the main model: normal(0.02), norms at 0 of (1 + w)
        model._init_weights(m)
    return mtp


def split_experts(name: str, t):
    """A fused expert parameter as the per-expert tensors a checkpoint stores (cat(gate, up) on dim 1)."""
    if name.endswith(".mlp.experts.gate_up_proj"):
        prefix, inter = name[: -len("gate_up_proj")], t.shape[1] // 2
        out = {}
        for e in range(t.shape[0]):
            out[f"{prefix}{e}.gate_proj.weight"] = t[e, :inter]
            out[f"{prefix}{e}.up_proj.weight"] = t[e, inter:]
        return out
    if name.endswith(".mlp.experts.down_proj"):
        prefix = name[: -len("down_proj")]
        return {f"{prefix}{e}.down_proj.weight": t[e] for e in range(t.shape[0])}
    return {name: t}


# ---------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", required=True, help="english_corpus.py's output (train.jsonl, heldout.jsonl)")
    ap.add_argument("--qwen-tokenizer", required=True, help="Qwen's tokenizer.json and tokenizer_config.json")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--bpe-vocab", type=int, default=8166, help="BPE tokens; Qwen's 26 added tokens follow")
    ap.add_argument("--vocab", type=int, default=8192, help="embedding rows (>= BPE + added tokens)")
    ap.add_argument("--steps", type=int, default=1500)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--aux-coef", type=float, default=0.01)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--eval-windows", type=int, default=64)
    ap.add_argument("--time-limit", type=float, default=420, help="seconds of training before it stops early")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from safetensors.torch import save_file
    from tokenizers import Tokenizer
    import transformers
    from transformers import AutoConfig
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as mod

    report = {"args": vars(args), "torch": torch.__version__, "transformers": transformers.__version__,
              "device": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"}
    log(f"torch {torch.__version__} transformers {transformers.__version__} on {report['device']}")
    os.makedirs(args.out, exist_ok=True)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = "cuda"

    train_docs = read_jsonl(os.path.join(args.corpus, "train.jsonl"))
    held_docs = read_jsonl(os.path.join(args.corpus, "heldout.jsonl"))
    with open(os.path.join(args.out, "heldout.txt"), "w", encoding="utf-8") as f:  # the gate's text
        f.write("\n\n".join(sample_text(d) for d in held_docs) + "\n")
    ids = train_tokenizer(args.qwen_tokenizer, train_docs, args.bpe_vocab, args.out)
    if max(ids.values()) >= args.vocab:
        raise SystemExit(f"--vocab {args.vocab} is smaller than the tokenizer ({max(ids.values()) + 1})")
    tk = Tokenizer.from_file(os.path.join(args.out, "tokenizer.json"))
    probe = tk.encode("<|im_start|>user\nHello there.<|im_end|>", add_special_tokens=False).ids
    assert probe[0] == ids["<|im_start|>"] and probe[-1] == ids["<|im_end|>"], probe
    rng = random.Random(args.seed)
    train = torch.tensor(token_stream(tk, train_docs, rng, chats=True), dtype=torch.long)
    held = torch.tensor(token_stream(tk, held_docs, random.Random(args.seed + 1), chats=False), dtype=torch.long)
    words = sum(len(s.split()) for d in train_docs for p in d["paragraphs"] for s in p)
    log(f"data: train {train.numel()} tokens (with chats), held-out {held.numel()} tokens; "
        f"{words} training words")
    report["data"] = {"train_tokens": train.numel(), "heldout_tokens": held.numel(), "train_words": words}

    cfg_dict = model_config(ids, args.vocab)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg_dict, f, indent=2)
    with open(os.path.join(args.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": ids["<|endoftext|>"], "eos_token_id": [ids["<|im_end|>"], ids["<|endoftext|>"]],
                   "pad_token_id": ids["<|endoftext|>"], "do_sample": True, "temperature": 0.7, "top_k": 20,
                   "top_p": 0.95}, f, indent=2)
    config = AutoConfig.from_pretrained(args.out, local_files_only=True)
    config._attn_implementation = "sdpa"
    with torch.device(dev):
        model = mod.Qwen3_5MoeForCausalLM(config)
        mtp = build_mtp(torch, mod, model)
    model.train()
    mtp.train()
    n_main = sum(p.numel() for p in model.parameters())
    n_mtp = sum(p.numel() for p in mtp.parameters())
    log(f"model: {n_main / 1e6:.2f}M parameters, MTP {n_mtp / 1e6:.2f}M")
    for name, p in mtp.named_parameters():
        log(f"  mtp.{name} {tuple(p.shape)} mean {p.float().mean().item():+.4f} std {p.float().std().item() if p.numel() > 1 else 0:.4f}")
    report["parameters"] = {"main": n_main, "mtp": n_mtp}

    # The rotary embedding the main model computes, reused for the MTP rows (row t at position t).
    captured = {}
    model.model.rotary_emb.register_forward_hook(lambda m, i, o: captured.__setitem__("pe", o))
    causal = torch.ones(args.seq - 1, args.seq - 1, dtype=torch.bool, device=dev).tril()[None, None]
    try:
        from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import load_balancing_loss_func
    except ImportError:
        load_balancing_loss_func = None

    def forward(x):
        """Main and MTP losses over windows x [B, seq+1]; also top-1 hits of each."""
        inp, labels = x[:, :-1], x[:, 1:]
        out = model.model(input_ids=inp, output_router_logits=load_balancing_loss_func is not None)
        h = out.last_hidden_state
        logits = model.lm_head(h).float()
        main = F.cross_entropy(logits.view(-1, logits.shape[-1]), labels.reshape(-1))
        aux = torch.zeros((), device=dev)
        rl = getattr(out, "router_logits", None)
        if load_balancing_loss_func is not None and rl:
            aux = load_balancing_loss_func(rl, config.num_experts, config.num_experts_per_tok)
        n = args.seq - 1
        cos, sin = captured["pe"]
        assert cos.shape[1] == inp.shape[1], f"rotary embedding shape {tuple(cos.shape)}"
        pe = (cos[:, :n], sin[:, :n])
        emb = F.embedding(inp[:, 1:], model.model.embed_tokens.weight.detach())
        m = mtp(emb, h[:, :n].detach(), pe, causal)
        mlogits = F.linear(m, model.lm_head.weight.detach()).float()
        mtarget = x[:, 2:]
        mtp_loss = F.cross_entropy(mlogits.reshape(-1, mlogits.shape[-1]), mtarget.reshape(-1))
        hits = (logits.argmax(-1) == labels).float().mean()
        mhits = (mlogits.argmax(-1) == mtarget).float().mean()
        return main, aux, mtp_loss, hits, mhits

    # The MTP layer must be causal: changing the last row's inputs changes no earlier row.
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        x = torch.randint(0, args.bpe_vocab, (1, args.seq + 1), device=dev)
        model.model(input_ids=x[:, :-1])
        h = torch.randn(1, args.seq - 1, config.hidden_size, device=dev)
        e = torch.randn_like(h)
        cos, sin = captured["pe"]
        pe = (cos[:, :args.seq - 1], sin[:, :args.seq - 1])
        a = mtp(e, h, pe, causal).float()
        e2 = e.clone()
        e2[:, -1] += 1.0
        b = mtp(e2, h, pe, causal).float()
        assert torch.equal(a[:, :-1], b[:, :-1]) and not torch.equal(a[:, -1], b[:, -1]), "MTP layer not causal"
    log("MTP layer: causal")

    decay, no_decay = [], []
    for p in list(model.parameters()) + list(mtp.parameters()):
        (decay if p.dim() >= 2 else no_decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)

    def lr_at(step):
        if step < args.warmup:
            return args.lr * (step + 1) / args.warmup
        t = (step - args.warmup) / max(1, args.steps - args.warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, t))))

    gen = torch.Generator().manual_seed(args.seed)
    span = args.seq + 1
    held_windows = torch.stack([held[i * span:(i + 1) * span]
                                for i in range(min(args.eval_windows, held.numel() // span))]).to(dev)

    def evaluate():
        model.eval()
        mtp.eval()
        tot = torch.zeros(4, device=dev)
        with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
            for i in range(0, held_windows.shape[0], args.batch):
                main, _, mloss, hits, mhits = forward(held_windows[i:i + args.batch])
                w = held_windows[i:i + args.batch].shape[0]
                tot += torch.stack([main, mloss, hits, mhits]) * w
        model.train()
        mtp.train()
        r = (tot / held_windows.shape[0]).tolist()
        return {"loss": r[0], "perplexity": math.exp(r[0]), "top1": r[2], "mtp_loss": r[1], "mtp_top1": r[3]}

    evals = []
    best = None
    t_train = time.time()
    stopped_early = None
    step = 0
    for step in range(args.steps):
        if time.time() - t_train > args.time_limit:
            stopped_early = step
            log(f"time limit {args.time_limit} s reached at step {step}: stopping early")
            break
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        starts = torch.randint(0, train.numel() - span, (args.batch,), generator=gen)
        x = torch.stack([train[s:s + span] for s in starts.tolist()]).to(dev, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            main, aux, mloss, _, _ = forward(x)
            loss = main + args.aux_coef * aux + mloss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(model.parameters()) + list(mtp.parameters()), 1.0)
        opt.step()
        if step % 25 == 0:
            log(f"step {step} loss {main.item():.4f} aux {aux.item():.4f} mtp {mloss.item():.4f} lr {lr_at(step):.2e}")
        if (step + 1) % args.eval_every == 0 or step + 1 == args.steps:
            ev = dict(evaluate(), step=step + 1, seconds=round(time.time() - t_train, 1))
            evals.append(ev)
            log(f"eval {ev}")
            if best is None or ev["loss"] < best[0]["loss"]:
                best = (ev, {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()},
                        {k: v.detach().to("cpu", copy=True) for k, v in mtp.state_dict().items()})
    report["train_seconds"] = round(time.time() - t_train, 1)
    report["stopped_early_at_step"] = stopped_early
    report["evals"] = evals
    if best is None:
        raise SystemExit("no evaluation ran: nothing to keep")
    report["kept"] = best[0]
    log(f"keeping step {best[0]['step']}: held-out loss {best[0]['loss']:.4f}")
    model.load_state_dict(best[1])
    mtp.load_state_dict(best[2])
    model.eval()

    # The noise floor a quality gate's thresholds are set against: the same BF16 weights computed in
    # BF16 (autocast) against FP32, over the held-out windows, in the gate's own figures.
    model_fp32 = copy.deepcopy(model).float()
    for p_ in model_fp32.parameters():
        p_.data = p_.data.to(torch.bfloat16).float()
    kls, agree = [], []
    with torch.no_grad():
        for i in range(0, held_windows.shape[0], args.batch):
            x = held_windows[i:i + args.batch, :-1]
            ref = F.log_softmax(model_fp32(input_ids=x).logits.float(), -1)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                cand = F.log_softmax(model_fp32(input_ids=x).logits.float(), -1)
            kls.append((ref.exp() * (ref - cand)).sum(-1).flatten())
            agree.append((ref.argmax(-1) == cand.argmax(-1)).float().flatten())
    kl = torch.cat(kls).clamp_min(0).sort().values
    report["bf16_noise"] = {"kl_mean": kl.mean().item(), "kl_p99": kl[int(math.ceil(0.99 * kl.numel())) - 1].item(),
                            "kl_max": kl[-1].item(), "top1_agreement": torch.cat(agree).mean().item(),
                            "positions": kl.numel()}
    log(f"BF16 compute against FP32 on the same weights: {report['bf16_noise']}")
    del model_fp32

    # Greedy continuations from the kept weights, in BF16 as the fuel stores them.
    samples = []
    model_bf16 = copy.deepcopy(model).to(torch.bfloat16)
    for prompt in ["The quick brown fox", "In the morning the city", "The committee said that",
                   chat_text("Tell me about the river.", "")[: -len("<|im_end|>\n")]]:
        x = torch.tensor([tk.encode(prompt, add_special_tokens=False).ids], device=dev)
        with torch.no_grad():
            y = model_bf16.generate(x, max_new_tokens=48, do_sample=False, eos_token_id=ids["<|im_end|>"],
                                    pad_token_id=ids["<|endoftext|>"])
        text = tk.decode(y[0, x.shape[1]:].tolist(), skip_special_tokens=False)
        samples.append({"prompt": prompt, "greedy": text})
        log(f"sample {prompt!r} -> {text!r}")
    report["samples"] = samples

    tensors = {}
    for name, p in model.named_parameters():
        tensors.update(split_experts(name, p.detach().to(torch.bfloat16)))
    for name, p in mtp.named_parameters():
        tensors.update(split_experts("mtp." + name, p.detach().to(torch.bfloat16)))
    tensors = {k: v.contiguous().cpu() for k, v in tensors.items()}
    save_file(tensors, os.path.join(args.out, "model.safetensors"), metadata={"format": "pt"})
    size = os.path.getsize(os.path.join(args.out, "model.safetensors"))
    log(f"wrote {len(tensors)} tensors, {size / 2**20:.1f} MiB")
    report["safetensors_bytes"] = size
    report["total_seconds"] = round(time.time() - T0, 1)
    with open(os.path.join(args.out, "train_report.json"), "w") as f:
        json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
