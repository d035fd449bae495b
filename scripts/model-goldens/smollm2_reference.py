"""Golden greedy continuations of the real SmolLM2-135M-Instruct directory that smollm2_dir.py
writes, for internal/model's TestRealSmolLM2Directory:

    /tmp/tokvenv/bin/python scripts/model-goldens/smollm2_reference.py /tmp/hone-smollm2-135m GGUF

writes internal/model/testdata/smollm2-real.json: for each question, the prompt ids (the chat
template rendered by Jinja2 as transformers does, then encoded by the tokenizers library), some
logits at the last prompt position (the 64 largest, every 97th) and 16 greedy tokens, from a plain float64 NumPy forward pass
of the Llama architecture in transformers' layout (rotate-half RoPE, theta from
rope_parameters). The same pass run on the GGUF's own tensors with llama.cpp's layout (q/k rows
permuted, adjacent-pair RoPE) must agree to 1e-9, which checks that smollm2_dir.py undid the
permutation. Transformers itself is not needed (nor installable here without a large torch).
"""
import json
import os
import struct
import sys

import jinja2
import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize
from tokenizers import Tokenizer

d, gguf_path = sys.argv[1], sys.argv[2]
here = os.path.dirname(os.path.abspath(__file__))
out_path = os.path.join(here, "..", "..", "internal", "model", "testdata", "smollm2-real.json")
cfg = json.load(open(os.path.join(d, "config.json")))
with open(os.path.join(d, "model.safetensors"), "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    hdr = json.loads(f.read(n))
    buf = f.read()
W = {k: np.frombuffer(buf[v["data_offsets"][0]:v["data_offsets"][1]], dtype=np.float32).reshape(v["shape"]).astype(np.float64)
     for k, v in hdr.items() if k != "__metadata__"}
H, KV, hd, L = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"], cfg["num_hidden_layers"]
theta, eps = cfg["rope_parameters"]["rope_theta"], cfg["rms_norm_eps"]
inv = 1.0 / theta ** (np.arange(0, hd, 2) / hd)


def rms(x, w):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rope_half(x, pos):  # transformers: rotate_half
    ang = np.outer(pos, inv)
    ang = np.concatenate([ang, ang], -1)
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    return x * cos + np.concatenate([-x[..., hd // 2:], x[..., :hd // 2]], -1) * sin


def rope_pairs(x, pos):  # llama.cpp's layout: adjacent pairs
    ang = np.outer(pos, inv)
    cos, sin = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
    out = np.empty_like(x)
    out[..., 0::2] = x[..., 0::2] * cos - x[..., 1::2] * sin
    out[..., 1::2] = x[..., 0::2] * sin + x[..., 1::2] * cos
    return out


def forward(ids, Wq, Wk, rope):
    T = len(ids)
    pos = np.arange(T)
    x = W["model.embed_tokens.weight"][ids]
    mask = np.triu(np.full((T, T), -np.inf), 1)
    for l in range(L):
        p = f"model.layers.{l}."
        h = rms(x, W[p + "input_layernorm.weight"])
        q = rope((h @ Wq[l].T).reshape(T, H, hd), pos)
        k = np.repeat(rope((h @ Wk[l].T).reshape(T, KV, hd), pos), H // KV, 1)
        v = np.repeat((h @ W[p + "self_attn.v_proj.weight"].T).reshape(T, KV, hd), H // KV, 1)
        s = np.einsum("thd,shd->hts", q, k) / np.sqrt(hd) + mask
        s = np.exp(s - s.max(-1, keepdims=True))
        s /= s.sum(-1, keepdims=True)
        x = x + np.einsum("hts,shd->thd", s, v).reshape(T, H * hd) @ W[p + "self_attn.o_proj.weight"].T
        h = rms(x, W[p + "post_attention_layernorm.weight"])
        g, u = h @ W[p + "mlp.gate_proj.weight"].T, h @ W[p + "mlp.up_proj.weight"].T
        x = x + (g / (1 + np.exp(-g)) * u) @ W[p + "mlp.down_proj.weight"].T
    return rms(x, W["model.norm.weight"]) @ W["model.embed_tokens.weight"].T


Wq = [W[f"model.layers.{l}.self_attn.q_proj.weight"] for l in range(L)]
Wk = [W[f"model.layers.{l}.self_attn.k_proj.weight"] for l in range(L)]
r = GGUFReader(gguf_path)
T = {t.name: t for t in r.tensors}


def gguf(name):
    return dequantize(T[name].data, T[name].tensor_type).astype(np.float64)


Gq = [gguf(f"blk.{l}.attn_q.weight") for l in range(L)]
Gk = [gguf(f"blk.{l}.attn_k.weight") for l in range(L)]

tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
tok_cfg = json.load(open(os.path.join(d, "tokenizer_config.json")))
env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
template = env.from_string(open(os.path.join(d, "chat_template.jinja")).read())
cases = []
for question in ["What is the capital of France?", "What is the largest planet in the solar system?",
                 "Write the numbers from 1 to 12, separated by commas."]:
    text = template.render(messages=[{"role": "user", "content": question}], add_generation_prompt=True,
                           bos_token=tok_cfg["bos_token"], eos_token=tok_cfg["eos_token"])
    ids = tok.encode(text, add_special_tokens=True).ids
    logits = forward(ids, Wq, Wk, rope_half)
    other = forward(ids, Gq, Gk, rope_pairs)
    assert np.abs(logits - other).max() < 1e-9, "q/k permutation not undone"
    last = logits[-1]
    cur, gen = list(ids), []
    for _ in range(16):
        nxt = int(forward(cur, Wq, Wk, rope_half)[-1].argmax()) if gen else int(last.argmax())
        if nxt == cfg["eos_token_id"]:
            break
        gen.append(nxt)
        cur.append(nxt)
    print(question, "->", repr(tok.decode(gen)))
    # The 64 largest logits and every 97th, to keep the file small.
    keep = sorted(set(np.argsort(-last)[:64].tolist()) | set(range(0, len(last), 97)))
    cases.append({"question": question, "prompt_ids": ids,
                  "logits": [[i, round(float(last[i]), 6)] for i in keep],
                  "greedy": gen, "greedy_text": tok.decode(gen)})
with open(out_path, "w") as f:
    json.dump({"note": "made by scripts/model-goldens/smollm2_reference.py", "cases": cases}, f)
    f.write("\n")
