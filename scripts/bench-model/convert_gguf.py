"""Converts a synthetic Hone model directory to GGUF with llama.cpp's own converter, for the
llama.cpp side of the model benchmark (docs/performance.md).

Usage: PYTHONPATH=<llama.cpp>/gguf-py:<llama.cpp> python convert_gguf.py MODEL_DIR OUT.gguf f32|bf16

llama.cpp recognises tokenizers by hashing their pre-tokenizer output; Hone's synthetic
tokenizer is new to it, so this tells the converter which pre-tokenizer it uses (Qwen2's split
pattern, which synth models use) and otherwise runs the converter unchanged.
"""
import sys

import convert_hf_to_gguf as conv

conv.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
sys.argv = ["convert_hf_to_gguf.py", sys.argv[1], "--outfile", sys.argv[2], "--outtype", sys.argv[3]]
conv.main()
