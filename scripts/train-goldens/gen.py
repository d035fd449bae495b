"""Golden LoRA gradients from PyTorch + peft for internal/train's backward pass.

Usage: python gen.py MODEL_DIR OUT_DIR   (gen.sh runs it; needs torch, transformers, peft)

For each model directory (a tiny synthetic model written by `hone models synth`), a LoRA
adapter (rank 4, alpha 8, all seven target modules, B drawn at random so every gradient is
non-zero) is saved in PEFT's layout (float32), and the gradients of
loss = sum_t w_t * -log p(token_{t+1} | tokens_<=t) with respect to every lora_A and lora_B
are computed in float64 and written with the tokens, the weights and the loss.
"""
import gzip
import hashlib
import json
import os
import sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(src, torch_dtype=torch.float32)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=MODULES, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM")
    model = get_peft_model(base, cfg)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.1)
    model.save_pretrained(os.path.join(out, "adapter"))
    model = model.to(torch.float64)
    vocab = model.config.vocab_size
    tokens = torch.randint(0, vocab, (23,), generator=g).tolist()
    weights = torch.rand(22, generator=g, dtype=torch.float64)
    ids = torch.tensor([tokens])
    logits = model(input_ids=ids).logits[0]
    logp = torch.log_softmax(logits, dim=-1)
    nll = -logp[torch.arange(22), torch.tensor(tokens[1:])]
    loss = (weights * nll).sum()
    loss.backward()
    grads = {}
    for name, p in model.named_parameters():
        if p.grad is not None and "lora_" in name:
            grads[name.replace(".default", "")] = p.grad.flatten().tolist()
    weights_sha = hashlib.sha256(open(os.path.join(src, "model.safetensors"), "rb").read()).hexdigest()
    rec = {"weights_sha256": weights_sha, "tokens": tokens, "weights": weights.tolist(), "loss": loss.item(), "grads": grads}
    with gzip.open(os.path.join(out, "grads.json.gz"), "wt", encoding="utf-8") as f:
        json.dump(rec, f)
    print(f"loss {loss.item():.6f}, {len(grads)} gradient tensors", file=sys.stderr)


if __name__ == "__main__":
    main()
