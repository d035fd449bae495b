"""Golden logits for Hone's Phi-3 / Phi-4-mini forward pass (Phi3ForCausalLM), computed by
Hugging Face transformers (and peft) in float64 on synthetic weights.

Usage: python phi3.py MODELS_DIR OUT_DIR (phi3.sh does both steps). MODELS_DIR holds the models
`hone models synth --arch phi3` wrote: phi3 (whole-head RoPE, untied) and phi4mini
(partial_rotary_factor 0.75, tied embeddings), both with LongRoPE against an original context
of 64 positions. The -long variants run 100 tokens (long factors); the others 40 (short
factors). phi3-lora adds a PEFT adapter on Phi-3's own module names (qkv_proj, o_proj,
gate_up_proj, down_proj), saved under OUT_DIR/phi3-lora-adapter/.
"""
import hashlib
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM

VARIANTS = {"phi3": 40, "phi3-long": 100, "phi4mini": 40, "phi4mini-long": 100, "phi3-lora": 40}


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main():
    models, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    for variant, n in VARIANTS.items():
        base = variant.removesuffix("-lora").removesuffix("-long")
        d = os.path.join(models, base)
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
        model = model.to(torch.float64).eval()
        vocab = model.config.vocab_size
        g = torch.Generator().manual_seed(len(variant))
        ids = torch.randint(0, vocab, (1, n), generator=g)
        extra = {}
        if variant.endswith("-lora"):
            from peft import LoraConfig, get_peft_model

            cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                             target_modules=["qkv_proj", "o_proj", "gate_up_proj", "down_proj"])
            model = get_peft_model(model, cfg)
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if "lora_" in name:
                        p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.1)
            adapter_dir = os.path.join(out, "phi3-lora-adapter")
            model.to(torch.float32).save_pretrained(adapter_dir)
            model = model.to(torch.float64)
            extra["adapter"] = "phi3-lora-adapter"
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0]
        doc = {
            "variant": variant,
            "transformers": __import__("transformers").__version__,
            "torch": torch.__version__,
            "weights_sha256": sha256(os.path.join(d, "model.safetensors")),
            "tokens": ids[0].tolist(),
            "logits": [[float("%.9g" % v) for v in row] for row in logits.tolist()],
            **extra,
        }
        with open(os.path.join(out, variant + ".json"), "w") as f:
            json.dump(doc, f, separators=(",", ":"))
        print(variant, "max |logit|", float(logits.abs().max()))


if __name__ == "__main__":
    main()
