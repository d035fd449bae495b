"""Writes a GPT-2 tokenizer.json (to stdout) from GPT-2's encoder.json and vocab.bpe."""
import json
import os
import sys

src = sys.argv[1]
vocab = json.load(open(os.path.join(src, "encoder.json")))
merges = [l for l in open(os.path.join(src, "vocab.bpe"), encoding="utf-8").read().split("\n")[1:] if l]
eot = "<|endoftext|>"
print(json.dumps({
    "version": "1.0",
    "added_tokens": [{"id": vocab[eot], "content": eot, "single_word": False, "lstrip": False, "rstrip": False,
                      "normalized": True, "special": True}],
    "normalizer": None,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
    "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
    "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
              "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": merges},
}, ensure_ascii=False))
