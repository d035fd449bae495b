"""Writes internal/quant/testdata/quantize-goldens.json: ggml block encodings of a fixed set of
rows, from the reference implementations, for internal/quant's TestQuantizeGoldens.

  Q8_0, Q4_0, Q4_1, Q5_0, Q5_1: gguf-py's gguf.quants.quantize (numpy ports of ggml's
      quantize_row_*_ref).
  Q4_K, Q5_K, Q6_K: llama.cpp's llama-quantize (--pure Q4_K_S, Q5_K_S, Q6_K, no importance
      matrix, so ggml's quantize_row_*_ref) on a one-layer llama GGUF whose token_embd holds the
      rows; only when the llama.cpp binaries are given (HONE_LLAMA_CPP or the second argument).

Usage (the venv of scripts/test-setup.sh has gguf-py):
  ~/.cache/hone/goldens-venv/bin/python scripts/quant-goldens/gen.py OUT.json [LLAMA_CPP_BIN_DIR]
"""
import base64
import importlib.metadata
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

ROWS, COLS = 4, 256


def rows():
    rng = np.random.default_rng(20251125)
    x = (rng.standard_normal((ROWS, COLS)) * 0.05).astype(np.float32)
    x[1, 0:32] = 0                                           # an all-zero block
    x[1, 32:64] = 0.125                                      # a constant block
    x[1, 64:96] *= 40                                        # large values
    x[1, 100] = 3.0                                          # an outlier
    x[2, :] = rng.uniform(-1, 1, COLS).astype(np.float32)
    x[2, 0:32] *= np.float32(1e-6)                           # tiny: d is an f16 subnormal
    x[2, 32:64] = np.abs(x[2, 32:64]) + 0.5                  # all positive (min > 0)
    x[2, 64:96] = -np.abs(x[2, 64:96]) - 0.25                # all negative
    x[3, :] = rng.integers(-20, 21, COLS).astype(np.float32) * np.float32(0.03125)  # on a grid
    x[3, 128:160] = np.linspace(-2, 2, 32, dtype=np.float32)  # evenly spaced
    x[3, 200] = -250.0                                       # a huge negative outlier
    return x


def b64(a):
    return base64.b64encode(np.ascontiguousarray(a).tobytes()).decode()


def llama_quantize(bindir, x, ftype):
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.gguf"), os.path.join(d, "out.gguf")
        w = gguf.GGUFWriter(src, "llama")
        n = COLS
        w.add_block_count(1)
        w.add_context_length(64)
        w.add_embedding_length(n)
        w.add_feed_forward_length(n)
        w.add_head_count(4)
        w.add_head_count_kv(4)
        w.add_layer_norm_rms_eps(1e-5)
        w.add_rope_freq_base(10000.0)
        w.add_file_type(0)
        rng = np.random.default_rng(1)
        w.add_tensor("token_embd.weight", x)
        w.add_tensor("output_norm.weight", np.ones(n, np.float32))
        w.add_tensor("output.weight", rng.standard_normal((ROWS, n)).astype(np.float32))
        for name in ["attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"]:
            w.add_tensor(f"blk.0.{name}.weight", rng.standard_normal((n, n)).astype(np.float32))
        for name in ["attn_norm", "ffn_norm"]:
            w.add_tensor(f"blk.0.{name}.weight", np.ones(n, np.float32))
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        subprocess.run([os.path.join(bindir, "llama-quantize"), "--pure", src, dst, ftype, "2"],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        r = gguf.GGUFReader(dst)
        t = next(t for t in r.tensors if t.name == "token_embd.weight")
        return T(int(t.tensor_type)), np.array(t.data).tobytes()


def main():
    out = sys.argv[1]
    bindir = sys.argv[2] if len(sys.argv) > 2 else os.environ.get("HONE_LLAMA_CPP", "")
    x = rows()
    cases = []
    for t in [T.Q8_0, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1]:
        q = gguf.quants.quantize(x, t)
        cases.append({"type": t.name, "source": "gguf-py " + importlib.metadata.version("gguf"),
                      "encoded": b64(q)})
    if bindir:
        for t, ftype in [(T.Q4_K, "Q4_K_S"), (T.Q5_K, "Q5_K_S"), (T.Q6_K, "Q6_K")]:
            got, data = llama_quantize(bindir, x, ftype)
            assert got == t, (got, t)
            cases.append({"type": t.name, "source": "llama.cpp llama-quantize --pure " + ftype +
                          " (llama-cpp-python 0.3.16's llama.cpp 4227c9be)", "encoded": base64.b64encode(data).decode()})
    doc = {"rows": ROWS, "cols": COLS, "input_f32le": b64(x), "cases": cases}
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
