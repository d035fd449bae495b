"""Golden AdamW trajectory from torch.optim.AdamW and torch.nn.utils.clip_grad_norm_.

Usage: python adamw.py OUT.json   (needs torch)

Two parameter tensors, four steps with given gradients, learning rates and clipping; the
parameters after every step are written (float64 arithmetic), for internal/train's optim_test.
"""
import json
import sys

import torch


def main():
    g = torch.Generator().manual_seed(3)
    shapes = [(3, 4), (5,)]
    params = [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
    init = [p.tolist() for p in params]
    ps = [torch.nn.Parameter(p.clone()) for p in params]
    opt = torch.optim.AdamW(ps, lr=1.0, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.1)
    lrs = [1e-2, 5e-3, 2e-2, 1e-3]
    max_norm = 1.5
    steps = []
    for lr in lrs:
        grads = [torch.randn(s, generator=g, dtype=torch.float64) for s in shapes]
        for p, gr in zip(ps, grads):
            p.grad = gr.clone()
        norm = torch.nn.utils.clip_grad_norm_(ps, max_norm)
        for group in opt.param_groups:
            group["lr"] = lr
        opt.step()
        steps.append({"lr": lr, "grads": [gr.flatten().tolist() for gr in grads], "norm": float(norm),
                      "params": [p.detach().flatten().tolist() for p in ps]})
    json.dump({"weight_decay": 0.1, "max_norm": max_norm, "init": [torch.tensor(x).flatten().tolist() for x in init],
               "steps": steps}, open(sys.argv[1], "w"), indent=1)


if __name__ == "__main__":
    main()
