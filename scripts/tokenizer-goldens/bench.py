"""Encode throughput of Hugging Face tokenizers (Rust, via Python; one thread) on the text of
internal/tokenizer's BenchmarkEncode: the golden corpus repeated to about 1 MB."""
import gzip
import json
import os
import statistics
import time

os.environ["RAYON_NUM_THREADS"] = "1"
from tokenizers import Tokenizer  # noqa: E402

td = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "internal", "tokenizer", "testdata")
corpus = json.load(open(os.path.join(td, "corpus.json")))
one = "\n".join(corpus)
text = one * ((1 << 20) // len(one.encode()) + 1)
nbytes = len(text.encode())
for name in ["llama3", "qwen3", "gpt2"]:
    with gzip.open(os.path.join(td, name, "tokenizer.json.gz"), "rt") as f:
        tok = Tokenizer.from_str(f.read())
    tok.encode(text, add_special_tokens=False)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        tok.encode(text, add_special_tokens=False)
        times.append(time.perf_counter() - t)
    print(f"hf-tokenizers {name}: {nbytes / statistics.median(times) / 1e6:.1f} MB/s")
