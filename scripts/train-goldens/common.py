"""The part gen.py, qwen3moe.py and phi3.py share: a LoRA adapter on a synthetic model and the
float64 gradients of a weighted next-token loss, written as internal/train's gradient golden.
"""
import gzip
import hashlib
import json
import os

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


def write_grads(src, out, modules, n, **load_kwargs):
    """Loads the model of src (from_pretrained with load_kwargs) with a LoRA adapter (rank 4,
    alpha 8) on modules, B drawn at random (seeded), saves the adapter under out/adapter in
    PEFT's layout, and writes out/grads.json.gz: n random tokens, n-1 weights, the loss
    sum_t w_t * -log p(token_{t+1} | tokens_<=t) in float64 and its gradient for every lora_A
    and lora_B, with the SHA-256 of src/model.safetensors."""
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    base = AutoModelForCausalLM.from_pretrained(src, **load_kwargs)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules=modules, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM")
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
    return loss.item(), len(grads)
