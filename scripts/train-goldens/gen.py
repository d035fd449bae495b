"""Golden LoRA gradients from PyTorch + peft for internal/train's backward pass.

Usage: python gen.py MODEL_DIR OUT_DIR   (gen.sh runs it; needs torch, transformers, peft)

For each model directory (a tiny synthetic model written by `hone models synth`), a LoRA
adapter (rank 4, alpha 8, all seven target modules, B drawn at random so every gradient is
non-zero) is saved in PEFT's layout (float32), and the gradients of
loss = sum_t w_t * -log p(token_{t+1} | tokens_<=t) with respect to every lora_A and lora_B
are computed in float64 and written with the tokens, the weights and the loss.
"""
import sys

import torch

import common

MODULES = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def main():
    src, out = sys.argv[1], sys.argv[2]
    loss, n_grads = common.write_grads(src, out, MODULES, 23, torch_dtype=torch.float32)
    print(f"loss {loss:.6f}, {n_grads} gradient tensors", file=sys.stderr)


if __name__ == "__main__":
    main()
