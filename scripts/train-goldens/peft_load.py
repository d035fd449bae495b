"""Loads a Hone-written LoRA checkpoint with HF peft and prints the log-probabilities of each
next token of a sequence, for internal/train's TestPeftLoadsHoneCheckpoint.

Usage: python peft_load.py MODEL_DIR ADAPTER_DIR TOKENS_JSON
"""
import json
import sys

import torch
from peft import PeftModel
from transformers import AutoModelForCausalLM


def main():
    base = AutoModelForCausalLM.from_pretrained(sys.argv[1], torch_dtype=torch.float64)
    model = PeftModel.from_pretrained(base, sys.argv[2]).to(torch.float64)
    tokens = json.loads(sys.argv[3])
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([tokens])).logits[0]
    logp = torch.log_softmax(logits, dim=-1)
    print(json.dumps([logp[i, tokens[i + 1]].item() for i in range(len(tokens) - 1)]))


if __name__ == "__main__":
    main()
