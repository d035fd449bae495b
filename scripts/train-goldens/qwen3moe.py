"""Golden LoRA gradients of a Qwen3-MoE model from PyTorch + peft, for internal/train.

Usage: python qwen3moe.py MODEL_DIR OUT_DIR   (qwen3moe.sh runs it; needs torch, transformers, peft)

As gen.py, on a synthetic Qwen3-MoE (layer 1 dense, the others routed): a LoRA adapter (rank
4, alpha 8) on the attention projections q/k/v/o of every layer, B drawn at random, saved in
PEFT's layout; the gradients of loss = sum_t w_t * -log p(token_{t+1}) with respect to every
lora_A and lora_B in float64 (eager experts: the loop over experts), which reach the earlier
layers' adapters through the experts and the routing weights (softmax in float32, top-k,
normalisation) of the frozen router.
"""
import gzip
import hashlib
import json
import os
import sys

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM

MODULES = ["q_proj", "k_proj", "v_proj", "o_proj"]


def main():
    src, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32, experts_implementation="eager",
                                                attn_implementation="eager")
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
