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
import sys

import common

VARIANTS = ["qwen3moe", "qwen3moe-mixed", "qwen3moe-mixed-lora"]


def main():
    models, out = sys.argv[1], sys.argv[2]
    common.write_goldens(models, out, VARIANTS,
                         base=lambda v: v.removesuffix("-lora"),
                         n_tokens=lambda v: 40,
                         lora_targets=["q_proj", "k_proj", "v_proj", "o_proj"],
                         adapter_name=lambda v: "lora-adapter",
                         experts_implementation="eager")


if __name__ == "__main__":
    main()
