"""Golden logits for Hone's Qwen3-MoE forward pass, computed by transformers (and peft) in float64.

Usage: python qwen3moe.py MODELS_DIR OUT_DIR   (qwen3moe.sh runs it)
MODELS_DIR holds the synthetic models qwen3moe.sh writes with `hone models synth --arch
qwen3moe`. For each variant this writes OUT_DIR/<variant>.json: the token ids, the logits at
every position, and the SHA-256 of the weight file. The -lora variant adds a PEFT LoRA adapter on
the attention projections (q/k/v/o, every layer), the modules Hone adapts in Qwen3-MoE, saved
under OUT_DIR/lora-adapter/. (peft 0.21 turns gate_proj/up_proj/down_proj targets on a
transformers 5 MoE model into target_parameters on the experts' 3-D weights, a layout Hone
does not read.)
"""
import hashlib
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM

VARIANTS = ["qwen3moe", "qwen3moe-mixed", "qwen3moe-mixed-lora"]


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
    for variant in VARIANTS:
        base = variant.removesuffix("-lora")
        d = os.path.join(models, base)
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager",
                                                     experts_implementation="eager")
        model = model.to(torch.float64).eval()
        vocab = model.config.vocab_size
        g = torch.Generator().manual_seed(len(variant))
        ids = torch.randint(0, vocab, (1, 40), generator=g)
        extra = {}
        if variant.endswith("-lora"):
            from peft import LoraConfig, get_peft_model

            cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj"])
            model = get_peft_model(model, cfg)
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if "lora_" in name:
                        p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.1)
            adapter_dir = os.path.join(out, "lora-adapter")
            model.to(torch.float32).save_pretrained(adapter_dir)
            model = model.to(torch.float64)
            extra["adapter"] = "lora-adapter"
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
