"""Golden logits for Hone's forward pass, computed by Hugging Face transformers (and peft).

Usage: python gen.py MODELS_DIR OUT_DIR
MODELS_DIR holds one synthetic model per variant, written by `hone models synth` (gen.sh does
both steps). For each variant this writes OUT_DIR/<variant>.json with the token ids, the
logits at every position computed in float64 from the stored weights, and the SHA-256 of the
weight file, so that the Go test can check it regenerated the same model. For the lora variant
it also creates a PEFT LoRA adapter with random weights (seeded) and saves it under
OUT_DIR/lora-adapter/.
"""
import os
import sys

import common

VARIANTS = ["llama", "llama-tied-rope3", "llama-bf16", "qwen2", "qwen3", "qwen3-lora",
            "gemma2", "gemma2-lora", "gemma3", "gemma3-lora", "mistral", "mistral-lora",
            "ministral"]
# GOLDEN_VARIANTS=a,b regenerates only those (the others' files stay as they are).
if os.environ.get("GOLDEN_VARIANTS"):
    VARIANTS = os.environ["GOLDEN_VARIANTS"].split(",")


def main():
    models, out = sys.argv[1], sys.argv[2]
    common.write_goldens(models, out, VARIANTS,
                         base=lambda v: v.removesuffix("-lora"),
                         n_tokens=lambda v: 40,
                         lora_targets=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
                         adapter_name=lambda v: "lora-adapter" if v == "qwen3-lora" else v + "-adapter")


if __name__ == "__main__":
    main()
