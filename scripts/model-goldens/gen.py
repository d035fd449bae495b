"""Golden logits for Hone's forward pass, computed by Hugging Face transformers (and peft).

Usage: python gen.py MODELS_DIR OUT_DIR
MODELS_DIR holds one synthetic model per variant, written by `hone models synth` (gen.sh does
both steps). For each variant this writes OUT_DIR/<variant>.json with the token ids, the
logits at every position computed in float64 from the stored weights, and the SHA-256 of the
weight file, so that the Go test can check it regenerated the same model. For the lora variant
it also creates a PEFT LoRA adapter with random weights (seeded) and saves it under
OUT_DIR/lora-adapter/.
"""
import hashlib
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM

VARIANTS = ["llama", "llama-tied-rope3", "llama-bf16", "qwen2", "qwen3", "qwen3-lora",
            "gemma2", "gemma2-lora", "gemma3", "gemma3-lora", "mistral", "mistral-lora"]
# GOLDEN_VARIANTS=a,b regenerates only those (the others' files stay as they are).
if os.environ.get("GOLDEN_VARIANTS"):
    VARIANTS = os.environ["GOLDEN_VARIANTS"].split(",")


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
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager")
        model = model.to(torch.float64).eval()
        vocab = model.config.vocab_size
        g = torch.Generator().manual_seed(len(variant))
        ids = torch.randint(0, vocab, (1, 40), generator=g)
        extra = {}
        if variant.endswith("-lora"):
            from peft import LoraConfig, get_peft_model

            cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                             target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
            model = get_peft_model(model, cfg)
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if "lora_" in name:
                        p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.1)
            adapter_name = "lora-adapter" if variant == "qwen3-lora" else variant + "-adapter"
            adapter_dir = os.path.join(out, adapter_name)
            model.to(torch.float32).save_pretrained(adapter_dir)
            model = model.to(torch.float64)
            extra["adapter"] = adapter_name
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
