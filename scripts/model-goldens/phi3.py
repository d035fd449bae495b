"""Golden logits for Hone's Phi-3 / Phi-4-mini forward pass (Phi3ForCausalLM), computed by
Hugging Face transformers (and peft) in float64 on synthetic weights.

Usage: python phi3.py MODELS_DIR OUT_DIR (phi3.sh does both steps). MODELS_DIR holds the models
`hone models synth --arch phi3` wrote: phi3 (whole-head RoPE, untied) and phi4mini
(partial_rotary_factor 0.75, tied embeddings), both with LongRoPE against an original context
of 64 positions; phi3window is phi3 with sliding_window 16 (every layer). The -long variants run 100 tokens (long factors); the others 40 (short
factors). phi3-lora adds a PEFT adapter on Phi-3's own module names (qkv_proj, o_proj,
gate_up_proj, down_proj), saved under OUT_DIR/phi3-lora-adapter/.
"""
import sys

import common

VARIANTS = {"phi3window": 40, "phi3": 40, "phi3-long": 100, "phi4mini": 40, "phi4mini-long": 100, "phi3-lora": 40}


def main():
    models, out = sys.argv[1], sys.argv[2]
    common.write_goldens(models, out, VARIANTS,
                         base=lambda v: v.removesuffix("-lora").removesuffix("-long"),
                         n_tokens=lambda v: VARIANTS[v],
                         lora_targets=["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
                         adapter_name=lambda v: "phi3-lora-adapter")


if __name__ == "__main__":
    main()
