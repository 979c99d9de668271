"""Reference for tessera's models::GPT2: builds a randomly initialized transformers GPT2LMHeadModel,
saves it with save_pretrained (OUTDIR/model.safetensors, Hugging Face's layout: Conv1D weights
(in, out), lm_head left out as tied) and OUTDIR/reference.safetensors with fixed tokens, their float32
logits (computed on the CPU, so no TF32), a greedy continuation of the first row's first 4 tokens, and
the configuration as metadata.

Usage: hf_gpt2_reference.py OUTDIR [--config small|124m]
  small: 2 layers, 4 heads, 64 embedding, 32 positions, 97 tokens (every parameter drawn at random,
         LayerNorm affine and biases included); 124m: GPT-2 small's configuration (random weights,
         nothing is downloaded).
"""
import argparse
import os

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--config", choices=["small", "124m"], default="small")
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    torch.manual_seed(0)

    if args.config == "small":
        cfg = GPT2Config(n_layer=2, n_head=4, n_embd=64, n_positions=32, vocab_size=97, resid_pdrop=0.0,
                         embd_pdrop=0.0, attn_pdrop=0.0)
        batch, length = 2, 16
    else:
        cfg = GPT2Config(resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        batch, length = 2, 64
    model = GPT2LMHeadModel(cfg).float().eval()
    if args.config == "small":
        with torch.no_grad():
            for name, p in model.named_parameters():
                if "ln_" in name and name.endswith(".weight"):
                    p.copy_(1 + 0.1 * torch.randn_like(p))
                else:
                    p.copy_(0.1 * torch.randn_like(p))
    try:
        model.save_pretrained(args.outdir, safe_serialization=True)
    except TypeError:  # transformers versions where safetensors is the only format
        model.save_pretrained(args.outdir)
    weights = os.path.join(args.outdir, "model.safetensors")
    if not os.path.exists(weights):  # an old transformers that wrote pytorch_model.bin
        sd = {k: v.contiguous() for k, v in model.state_dict().items() if k != "lm_head.weight"}
        save_file(sd, weights, metadata={"format": "pt"})

    tokens = torch.randint(0, cfg.vocab_size, (batch, length), dtype=torch.int64)
    with torch.no_grad():
        logits = model(tokens).logits.float().contiguous()
        prompt = tokens[:1, :4]
        greedy = model.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=8, do_sample=False,
                                pad_token_id=0)
    meta = {k: str(getattr(cfg, k)) for k in ("n_layer", "n_head", "n_embd", "n_positions", "vocab_size",
                                              "layer_norm_epsilon")}
    save_file({"tokens": tokens, "logits": logits, "greedy": greedy.to(torch.int64).contiguous()},
              os.path.join(args.outdir, "reference.safetensors"), metadata=meta)


if __name__ == "__main__":
    main()
