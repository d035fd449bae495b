"""Golden LoRA gradients of a Qwen3-MoE model from PyTorch + peft, for internal/train.

Usage: python qwen3moe.py MODEL_DIR OUT_DIR   (qwen3moe.sh runs it; needs torch, transformers, peft)

As gen.py, on a synthetic Qwen3-MoE (layer 1 dense, the others routed): a LoRA adapter (rank
4, alpha 8) on the attention projections q/k/v/o of every layer, B drawn at random, saved in
PEFT's layout; the gradients of loss = sum_t w_t * -log p(token_{t+1}) with respect to every
lora_A and lora_B in float64 (eager experts: the loop over experts), which reach the earlier
layers' adapters through the experts and the routing weights (softmax in float32, top-k,
normalisation) of the frozen router.
"""
import sys

import torch

import common

MODULES = ["q_proj", "k_proj", "v_proj", "o_proj"]


def main():
    src, out = sys.argv[1], sys.argv[2]
    loss, n_grads = common.write_grads(src, out, MODULES, 23, dtype=torch.float32, experts_implementation="eager",
                                       attn_implementation="eager")
    print(f"loss {loss:.6f}, {n_grads} gradient tensors", file=sys.stderr)


if __name__ == "__main__":
    main()
