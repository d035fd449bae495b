"""Golden LoRA gradients from PyTorch + peft for Phi-3 (Phi3ForCausalLM) in internal/train.

Usage: python phi3.py MODEL_DIR OUT_DIR N_TOKENS   (phi3.sh runs it)

As gen.py, with Phi-3's module names (qkv_proj, o_proj, gate_up_proj, down_proj) and N_TOKENS
tokens (past original_max_position_embeddings, the long LongRoPE factors apply): a rank-4
adapter with random B saved in PEFT's layout, and the float64 gradients of
loss = sum_t w_t * -log p(token_{t+1} | tokens_<=t) for every lora_A and lora_B.
"""
import sys

import torch

import common

MODULES = ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"]


def main():
    src, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    loss, n_grads = common.write_grads(src, out, MODULES, n, dtype=torch.float32, attn_implementation="eager")
    print(f"loss {loss:.6f}, {n_grads} gradient tensors", file=sys.stderr)


if __name__ == "__main__":
    main()
