"""Golden LoRA gradients from PyTorch + peft for Phi-3 (Phi3ForCausalLM) in internal/train.

Usage: python phi3.py MODEL_DIR OUT_DIR N_TOKENS   (phi3.sh runs it)

As gen.py, with Phi-3's module names (qkv_proj, o_proj, gate_up_proj, down_proj) and N_TOKENS
tokens (past original_max_position_embeddings, the long LongRoPE factors apply): a rank-4
adapter with random B saved in PEFT's layout, and the float64 gradients of
loss = sum_t w_t * -log p(token_{t+1} | tokens_<=t) for every lora_A and lora_B.
"""
import gzip
import hashlib
import json
import os
import sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

MODULES = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]


def main():
    src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32, attn_implementation="eager")
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
    tokens = torch.randint(0, vocab, (n,), generator=g).tolist()
    weights = torch.rand(n - 1, generator=g, dtype=torch.float64)
    ids = torch.tensor([tokens])
    logits = model(input_ids=ids).logits[0]
    logp = torch.log_softmax(logits, dim=-1)
    nll = -logp[torch.arange(n - 1), torch.tensor(tokens[1:])]
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
