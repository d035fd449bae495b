"""PyTorch + peft reference for BenchmarkSFTStep: one LoRA SFT step (forward, backward,
AdamW) on one 512-token sequence, rank 16 on all seven modules, on CPU.

Usage: python torch_sft.py MODEL_DIR [STEPS] [DTYPE] [QUANT]   (DTYPE float32 or bfloat16)
QUANT nf4 loads the base in bitsandbytes' 4-bit NF4 (QLoRA's recipe: BitsAndBytesConfig with
load_in_4bit, double quantisation, compute in DTYPE); it needs bitsandbytes (CPU support since
0.45). Prints tokens/s (median of the steps after one warm-up), peak RSS in MB and CPU seconds per
step (all threads, median).
"""
import resource
import statistics
import sys
import time

import torch
from peft import LoraConfig, get_peft_model
from transformers import AutoModelForCausalLM


def main():
    src = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    dtype = getattr(torch, sys.argv[3]) if len(sys.argv) > 3 else torch.float32
    torch.set_num_threads(2)
    torch.manual_seed(0)
    quant = sys.argv[4] if len(sys.argv) > 4 else ""
    if quant == "nf4":
        from transformers import BitsAndBytesConfig
        q = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
                               bnb_4bit_compute_dtype=dtype)
        base = AutoModelForCausalLM.from_pretrained(src, dtype=dtype, quantization_config=q, device_map="cpu")
    elif quant:
        sys.exit(f"QUANT {quant!r}: use nf4")
    else:
        base = AutoModelForCausalLM.from_pretrained(src, torch_dtype=dtype)
    cfg = LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                     target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
    model = get_peft_model(base, cfg)
    model.train()
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    ids = torch.randint(0, model.config.vocab_size, (1, 512))
    times, cpu = [], []
    for i in range(steps + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        opt.step()
        opt.zero_grad()
        if i > 0:
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    tps = 512 / statistics.median(times)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # CPU seconds per step (all threads; median): steadier than tokens/s on a shared machine.
    print(f"tokens/s {tps:.1f} peak-RSS-MB {rss:.0f} cpu-s/step {statistics.median(cpu):.2f}")


if __name__ == "__main__":
    main()
