"""Golden log-likelihoods for cmd/hone's TestConformanceLMEval on the real SmolLM2 directory:
transformers' log P(" choice" | "Question: What is the capital of <country>?\nAnswer:") of each
choice of the scenario's questions (conformance/lmeval-py/scenario.py), as lm-evaluation-harness
asks them (the choice after a space, its tokens scored given the question's).

Run with a Python that has torch and transformers (the benchmark venv):
    python scripts/model-goldens/smollm2_loglikelihood.py "$HONE_SMOLLM2_DIR"
and copy the printed lists into the test.
"""
import json
import sys

import torch
import transformers

ROWS = [("France", ["Paris", "Rome", "Berlin"]), ("Italy", ["Paris", "Rome", "Berlin"]),
        ("Germany", ["Paris", "Rome", "Berlin"]), ("Japan", ["Tokyo", "Beijing", "Seoul"])]

d = sys.argv[1]
tok = transformers.AutoTokenizer.from_pretrained(d)
model = transformers.AutoModelForCausalLM.from_pretrained(d, torch_dtype=torch.float32)
out = []
for country, choices in ROWS:
    ctx = f"Question: What is the capital of {country}?\nAnswer:"
    a = tok(ctx, add_special_tokens=False).input_ids
    row = []
    for c in choices:
        b = a + tok(" " + c, add_special_tokens=False).input_ids
        with torch.no_grad():
            lp = torch.log_softmax(model(torch.tensor([b])).logits[0].double(), -1)
        row.append(round(sum(lp[i - 1, b[i]].item() for i in range(len(a), len(b))), 5))
    out.append(row)
print(json.dumps(out))
