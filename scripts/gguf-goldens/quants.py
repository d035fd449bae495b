"""Goldens for internal/gguf's block dequantization: for each quantized type Dequantize
supports, a few blocks of deterministic pseudo-random bytes (the float16 scale fields replaced
by sane finite values) and the Python gguf package's dequantization of them (gguf==0.19.0,
gguf.quants.dequantize), written to internal/gguf/testdata/quant_goldens.json.

Run with the goldens venv (it has gguf and numpy); it needs no model file:
    ~/.cache/hone/goldens-venv/bin/python scripts/gguf-goldens/quants.py
"""
import importlib.metadata
import json
import os

import gguf
import numpy as np
from gguf import GGMLQuantizationType as T

# type -> byte offsets of its float16 fields (d, and dmin or m where the type has one).
f16_fields = {
    T.Q8_0: [0], T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2],
    T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}
nblocks = 4

rng = np.random.default_rng(15)
out = {"gguf_version": importlib.metadata.version("gguf"), "numpy_version": np.__version__, "types": []}
for qtype, fields in f16_fields.items():
    block, size = gguf.constants.GGML_QUANT_SIZES[qtype]
    data = rng.integers(0, 256, size=(nblocks + 1, size), dtype=np.uint8)
    data[nblocks, :] = 0xFF  # a last block with every quant bit set (and the largest scales)
    for b in range(nblocks + 1):
        for off in fields:
            # magnitudes 2^-10..2^1 with either sign; the last block gets the extremes.
            v = rng.uniform(-1, 1) * 2.0 ** rng.integers(-10, 2) if b < nblocks else -1.5
            data[b, off:off + 2] = np.frombuffer(np.float16(v).tobytes(), dtype=np.uint8)
    raw = data.reshape(-1)
    values = np.asarray(gguf.quants.dequantize(raw, qtype), dtype=np.float32).reshape(-1)
    assert values.size == (nblocks + 1) * block and np.isfinite(values).all()
    out["types"].append({
        "type": qtype.name,
        "n": int(values.size),
        "hex": raw.tobytes().hex(),
        # float32 bit patterns, so the comparison is exact without decimal round trips.
        "bits": [int(x) for x in values.view(np.uint32)],
    })

dst = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "internal", "gguf", "testdata",
                   "quant_goldens.json")
with open(dst, "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print("wrote", os.path.normpath(dst))
