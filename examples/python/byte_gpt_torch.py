#!/usr/bin/env python3
"""A byte-level GPT trained with PyTorch on any text file: the script that byte_gpt.py translates line
by line into tessera (same model, data, optimizer, schedule and hyper-parameters); runs on PyTorch 1.13
(the masked softmax written out) and on PyTorch 2 (scaled_dot_product_attention).

The model and the run are those of `tessera train --model gpt2 --data text:FILE`: GPT-2's pre-norm
blocks with Hugging Face's parameter names, GELU with the tanh approximation, causal attention, the LM
head tied to the token embedding, vocabulary 256 (token = byte); AdamW (betas 0.9, 0.95) with weight
decay on the matrices and embeddings only, a linear warm-up then cosine decay to lr / 10, gradient
clipping at 1.0, bfloat16 autocast on the GPU. Batches are random windows drawn with numpy, so that
both scripts draw the same ones.

    python3 examples/python/byte_gpt_torch.py --data README.md --layers 2 --embd 64 --context 64 \\
        --batch-size 8 --steps 50

--init FILE.npz starts from the weights in FILE (numpy arrays by state_dict name, as byte_gpt.py
--save-init writes them); --losses FILE.json writes every step's training loss.
"""
import argparse
import contextlib
import json
import math
import time

import numpy as np

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout):
        super().__init__()
        assert n_embd % n_head == 0
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)  # q, k, v of every head in one matrix
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.attn_dropout = nn.Dropout(dropout)
        self.resid_dropout = nn.Dropout(dropout)
        self.n_head, self.n_embd, self.dropout = n_head, n_embd, dropout
        # PyTorch 2's fused attention where the library has it; otherwise the masked softmax written out.
        self.flash = hasattr(F, "scaled_dot_product_attention")
        if not self.flash:
            mask = torch.ones(block_size, block_size).tril().view(1, 1, block_size, block_size)
            self.register_buffer("mask", mask, persistent=False)

    def forward(self, x):  # (B, T, C)
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, H, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))  # (B, H, T, T)
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            att = self.attn_dropout(F.softmax(att, dim=-1))
            y = att @ v  # (B, H, T, hs)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, n_embd, dropout):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * n_embd, n_embd)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size, dropout):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size, dropout)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = MLP(n_embd, dropout)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, n_layer, n_head, n_embd, block_size, dropout=0.0, vocab_size=256):
        super().__init__()
        self.block_size = block_size
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            drop=nn.Dropout(dropout),
            h=nn.ModuleList([Block(n_embd, n_head, block_size, dropout) for _ in range(n_layer)]),
            ln_f=nn.LayerNorm(n_embd),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # tied: one parameter under two names
        # GPT-2's initialization: N(0, 0.02), the residual projections scaled by 1/sqrt(2 n_layer).
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def forward(self, idx, targets=None):  # idx (B, T) bytes as int64
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))  # (B, T, C)
        for block in self.transformer.h:
            x = block(x)
        logits = self.lm_head(self.transformer.ln_f(x))  # (B, T, 256)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    def configure_optimizer(self, lr, weight_decay, betas):
        decay = [p for p in self.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.parameters() if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=lr, betas=betas)

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, temperature=1.0, top_k=None):
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -self.block_size:])
            logits = logits[:, -1, :] / temperature
            if top_k is not None:
                v, _ = torch.topk(logits, top_k)
                logits[logits < v[:, [-1]]] = -float("inf")
            probs = F.softmax(logits, dim=-1)
            idx = torch.cat((idx, torch.multinomial(probs, num_samples=1)), dim=1)
        return idx


def get_lr(step, args):
    """Linear warm-up to lr over `warmup` steps, then cosine decay to min_lr at the last step."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    decay_steps = args.steps - 1 - args.warmup
    if decay_steps <= 0:
        return args.lr
    ratio = min(1.0, (step - args.warmup) / decay_steps)
    return args.min_lr + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (args.lr - args.min_lr)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="any text file: its bytes are the tokens")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--embd", type=int, default=384)
    p.add_argument("--context", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--steps", type=int, default=3000)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--min-lr", type=float, default=0.0, help="0: lr / 10")
    p.add_argument("--warmup", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--eval-every", type=int, default=250)
    p.add_argument("--eval-iters", type=int, default=20)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--sample-tokens", type=int, default=300)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--init", help="initial weights: an .npz of numpy arrays by state_dict name")
    p.add_argument("--save-init", help="write the initial weights there (.npz) before training")
    p.add_argument("--losses", help="write every step's loss there (JSON list)")
    args = p.parse_args(argv)
    args.min_lr = args.min_lr or args.lr / 10

    torch.manual_seed(args.seed)
    data = np.fromfile(args.data, dtype=np.uint8)
    n = int(0.9 * len(data))
    splits = {"train": data[:n], "val": data[n:]}
    rng = np.random.default_rng(args.seed)

    def get_batch(split):
        d = splits[split]
        ix = rng.integers(0, len(d) - args.context, size=args.batch_size)
        x = torch.from_numpy(np.stack([d[i:i + args.context] for i in ix]).astype(np.int64))
        y = torch.from_numpy(np.stack([d[i + 1:i + 1 + args.context] for i in ix]).astype(np.int64))
        return x.to(args.device), y.to(args.device)

    model = GPT(args.layers, args.heads, args.embd, args.context, args.dropout)
    if args.init:
        model.load_state_dict({k: torch.from_numpy(v) for k, v in np.load(args.init).items()})
    if args.save_init:
        np.savez(args.save_init, **{k: v.numpy() for k, v in model.state_dict().items()})
    model.to(args.device)
    optimizer = model.configure_optimizer(args.lr, args.weight_decay, (0.9, 0.95))
    autocast = torch.autocast(device_type="cuda", dtype=torch.bfloat16) if args.device == "cuda" else contextlib.nullcontext()

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        out = {}
        for split in ("train", "val"):
            total = 0.0
            for _ in range(args.eval_iters):
                x, y = get_batch(split)
                with autocast:
                    total += model(x, y)[1].item()
            out[split] = total / args.eval_iters
        model.train()
        return out

    n_params = sum(p.numel() for p in model.parameters())
    print(f"byte-level GPT: {args.layers} layers, {args.heads} heads, {args.embd} embd, context {args.context}: "
          f"{n_params:,} parameters; {len(data):,} bytes of {args.data}", flush=True)
    losses = []
    t0 = time.time()
    for step in range(args.steps):
        lr = get_lr(step, args)
        for group in optimizer.param_groups:
            group["lr"] = lr
        x, y = get_batch("train")
        with autocast:
            _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        if args.grad_clip > 0:
            nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
        optimizer.step()
        losses.append(loss.item())
        if (step + 1) % args.log_every == 0 or step == args.steps - 1:
            tokens_per_s = (step + 1) * args.batch_size * args.context / (time.time() - t0)
            print(f"step {step + 1}/{args.steps} | loss {losses[-1]:.4f} | lr {lr:.2e} | {tokens_per_s:,.0f} tok/s", flush=True)
        if (step + 1) % args.eval_every == 0 or step == args.steps - 1:
            est = estimate_loss()
            print(f"step {step + 1}: train loss {est['train']:.4f}, val loss {est['val']:.4f}", flush=True)

    if args.sample_tokens > 0:
        prompt = torch.tensor([[10]], dtype=torch.long, device=args.device)  # "\n"
        out = model.generate(prompt, args.sample_tokens, temperature=0.8, top_k=200)
        print(bytes(out[0].tolist()).decode("utf-8", errors="replace"))
    if args.losses:
        with open(args.losses, "w") as f:
            json.dump(losses, f)
    return losses


if __name__ == "__main__":
    main()
