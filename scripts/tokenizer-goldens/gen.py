"""Makes internal/tokenizer/testdata/goldens.jsonl with Hugging Face `tokenizers` (pinned in
requirements.txt), the reference implementation of tokenizer.json:

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install -r scripts/tokenizer-goldens/requirements.txt
    /tmp/tokvenv/bin/python scripts/tokenizer-goldens/gen.py

It writes the corpus (testdata/corpus.json) and, for each tokenizer under testdata/<name>/
(tokenizer.json.gz), the ids of every corpus string with and without special tokens, and the
decoding of those ids. check_js.mjs compares the same corpus with the JavaScript oracle
(@lenml/tokenizers) and reports any disagreement.
"""
import gzip
import json
import os
import sys

from tokenizers import Tokenizer

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from corpus import corpus  # noqa: E402

testdata = os.path.join(here, "..", "..", "internal", "tokenizer", "testdata")
with open(os.path.join(testdata, "corpus.json"), "w") as f:
    json.dump(corpus, f, ensure_ascii=False, indent=0)

with open(os.path.join(testdata, "goldens.jsonl"), "w") as out:
    for name in ["llama3", "qwen3", "gpt2"]:
        with gzip.open(os.path.join(testdata, name, "tokenizer.json.gz"), "rt") as f:
            tok = Tokenizer.from_str(f.read())
        for text in corpus:
            ids = tok.encode(text, add_special_tokens=False).ids
            ids_special = tok.encode(text, add_special_tokens=True).ids
            out.write(json.dumps({
                "tokenizer": name, "text": text, "ids": ids, "ids_special": ids_special,
                "decoded": tok.decode(ids, skip_special_tokens=False),
                "decoded_skip": tok.decode(ids, skip_special_tokens=True),
            }, ensure_ascii=False) + "\n")
