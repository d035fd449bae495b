"""Makes the SentencePiece test vocabulary of internal/tokenizer/testdata/spm/ and its goldens.

    python3 -m venv /tmp/spmvenv
    /tmp/spmvenv/bin/pip install sentencepiece==0.2.3 protobuf tokenizers==0.22.1 gguf==0.19.0 transformers==4.57.1
    /tmp/spmvenv/bin/python scripts/tokenizer-goldens/spm.py [--train]

--train trains tokenizer.model again with sentencepiece's BPE trainer (byte_fallback, split
digits, identity normalization, no whitespace folding: the options of Llama 2's model) on
README.md and docs/*.md. The committed model was trained on them as of commit 14b2e13; without
--train the committed model is used, so the other files can be remade exactly.

From tokenizer.model it writes:
  - spm.gguf: the tokenizer.ggml.* metadata that llama.cpp's convert_hf_to_gguf.py
    (_set_vocab_sentencepiece, then gguf.SpecialVocab) writes for it, no tensors;
  - legacy/ and metaspace/: tokenizer.json.gz and tokenizer_config.json as transformers'
    LlamaTokenizerFast converts the model, with legacy=True (normalizer Prepend + Replace) and
    legacy=False (pre-tokenizer Metaspace, prepend_scheme "first");
  - goldens-spm.jsonl: for each string of STRINGS,
      "spm": sentencepiece's ids, with llama.cpp's handling of control tokens written in the
             text (split off; each text fragment encoded on its own, so each gets the dummy
             prefix), and sentencepiece's decoding of them ("spm_decoded");
      "spm_nospace": the same with the dummy prefix off (add_space_prefix false);
      "legacy"/"metaspace": tokenizers' ids without and with special tokens, and its decodings
             of the ids with and without skip_special_tokens;
      and the same from tokenizers for each variant of variants.json: metaspace/tokenizer.json
      with top-level parts replaced (other Metaspace options, the Metaspace decoder);
  - goldens-spm-corpus.json: sentencepiece's ids ("spm" above) for each string of
    testdata/corpus.json, the corpus of the byte-level goldens.
"""
import argparse
import glob
import gzip
import json
import os
import re
import shutil
import sys
import tempfile

import sentencepiece as spm
from sentencepiece import sentencepiece_model_pb2 as spm_pb2

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "..", "..")
out_dir = os.path.join(root, "internal", "tokenizer", "testdata", "spm")
model_path = os.path.join(out_dir, "tokenizer.model")

STRINGS = [
    "", " ", "  ", "Hello world", "Hello, world! How are you?", " leading space", "trailing space ",
    "  two  spaces  between  ", "    four", "\n", "line one\nline two\n", "\n\nblank lines\n\n",
    "tab\there", "\t\tindented\tcode", "x\r\ny", "12345 67890", "3.14159 and 2,718", "1e10 -42 +7",
    "Café crème brûlée naïve", "Ünïcödé Ωμέγα", "日本語のテキスト", "中文字符", "한국어",
    "emoji 😀🎉", "👍", "a😀b", "mixed\u00a0nbsp and\u2003em", "zero\u200bwidth",
    "<s>", "</s>", "<unk>", "<s>Hello</s>", "a<s>b", " <s> x", "Hi</s></s>", "<s> ",
    "▁literal metaspace ▁▁", "def f(x):\n    return x * 2\n", "The model reads GGUF files.",
    "tokenizer.ggml.tokens", "Mixed: ASCII, 数字 123, and émojis 🚀!", "<0x41> is not a byte",
    "ends with newline\n", " ", "   \n   ",
]

# Control and unknown tokens that llama.cpp (and transformers' added tokens) find in the text.
SPECIALS = ["<unk>", "<s>", "</s>"]

META = "\u2581"
VARIANTS = {
    "metaspace_always_split": {"pre_tokenizer": {"type": "Metaspace", "replacement": META,
                                                 "prepend_scheme": "always", "split": True}},
    "metaspace_never": {"pre_tokenizer": {"type": "Metaspace", "replacement": META,
                                          "prepend_scheme": "never", "split": False}},
    "metaspace_decoder": {"decoder": {"type": "Metaspace", "replacement": META,
                                      "prepend_scheme": "always", "split": True}},
}

CHAT_TEMPLATE = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'user' %}"
                 "{{ '[INST] ' + m['content'] + ' [/INST]' }}{% else %}"
                 "{{ ' ' + m['content'] + eos_token }}{% endif %}{% endfor %}")


def train():
    texts = [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    os.makedirs(out_dir, exist_ok=True)
    spm.SentencePieceTrainer.train(
        input=",".join(texts), model_prefix=os.path.join(out_dir, "tokenizer"), model_type="bpe",
        vocab_size=800, byte_fallback=True, split_digits=True, character_coverage=1.0,
        normalization_rule_name="identity", remove_extra_whitespaces=False, add_dummy_prefix=True,
        allow_whitespace_only_pieces=True, unk_id=0, bos_id=1, eos_id=2, pad_id=-1,
        num_threads=1, max_sentence_length=1 << 16, minloglevel=2)
    os.remove(os.path.join(out_dir, "tokenizer.vocab"))


def hf_files(legacy, dst):
    from transformers import LlamaTokenizerFast
    tok = LlamaTokenizerFast(vocab_file=model_path, legacy=legacy, from_slow=True,
                             add_bos_token=True, add_eos_token=False, add_prefix_space=True)
    tok.chat_template = CHAT_TEMPLATE
    tmp = tempfile.mkdtemp()
    tok.save_pretrained(tmp)
    os.makedirs(dst, exist_ok=True)
    with open(os.path.join(tmp, "tokenizer.json"), "rb") as f, \
            gzip.GzipFile(os.path.join(dst, "tokenizer.json.gz"), "wb", mtime=0) as g:
        g.write(f.read())
    cfg = json.load(open(os.path.join(tmp, "tokenizer_config.json")))
    if "chat_template" not in cfg and os.path.exists(os.path.join(tmp, "chat_template.jinja")):
        cfg["chat_template"] = open(os.path.join(tmp, "chat_template.jinja")).read()
    with open(os.path.join(dst, "tokenizer_config.json"), "w") as f:
        json.dump(cfg, f, indent=1, ensure_ascii=False, sort_keys=True)
        f.write("\n")
    return tmp


def write_gguf(sp, hf_dir):
    """What convert_hf_to_gguf.py's _set_vocab_sentencepiece writes (no added_tokens.json)."""
    import gguf
    n = sp.vocab_size()
    tokens, scores, types = [], [], []
    for i in range(n):
        t = gguf.TokenType.NORMAL
        if sp.IsUnknown(i):
            t = gguf.TokenType.UNKNOWN
        elif sp.IsControl(i):
            t = gguf.TokenType.CONTROL
        elif sp.IsUnused(i):
            t = gguf.TokenType.UNUSED
        elif sp.IsByte(i):
            t = gguf.TokenType.BYTE
        tokens.append(sp.IdToPiece(i).encode("utf-8"))
        scores.append(sp.GetScore(i))
        types.append(t)
    w = gguf.GGUFWriter(os.path.join(out_dir, "spm.gguf"), "llama")
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    gguf.SpecialVocab(hf_dir, n_vocab=len(tokens)).add_to_gguf(w)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def split_specials(text):
    pat = "|".join(re.escape(s) for s in sorted(SPECIALS, key=len, reverse=True))
    last = 0
    for m in re.finditer(pat, text):
        if m.start() > last:
            yield text[last:m.start()], False
        yield m.group(0), True
        last = m.end()
    if last < len(text):
        yield text[last:], False


def llama_cpp_ids(sp, text):
    ids = []
    for piece, special in split_specials(text):
        ids += [sp.PieceToId(piece)] if special else sp.encode(piece)
    return ids


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", action="store_true")
    args = ap.parse_args()
    if args.train:
        train()
    from tokenizers import Tokenizer
    sp = spm.SentencePieceProcessor(model_file=model_path)
    proto = spm_pb2.ModelProto()
    proto.ParseFromString(open(model_path, "rb").read())
    proto.normalizer_spec.add_dummy_prefix = False
    sp_nospace = spm.SentencePieceProcessor(model_proto=proto.SerializeToString())

    hf = {}
    for name, legacy in (("legacy", True), ("metaspace", False)):
        tmp = hf_files(legacy, os.path.join(out_dir, name))
        hf[name] = Tokenizer.from_file(os.path.join(tmp, "tokenizer.json"))
        if legacy:
            write_gguf(sp, tmp)
        shutil.rmtree(tmp)
    with gzip.open(os.path.join(out_dir, "metaspace", "tokenizer.json.gz"), "rt", encoding="utf-8") as f:
        base = json.load(f)
    for name, patch in VARIANTS.items():
        hf[name] = Tokenizer.from_str(json.dumps({**base, **patch}))
    with open(os.path.join(out_dir, "variants.json"), "w") as f:
        json.dump(VARIANTS, f, indent=1)
        f.write("\n")

    rows, differ = [], 0
    for text in STRINGS:
        ids = llama_cpp_ids(sp, text)
        row = {"text": text, "spm": ids, "spm_decoded": sp.decode(ids)}
        nospace = llama_cpp_ids(sp_nospace, text)
        row["spm_nospace"] = nospace
        row["spm_nospace_decoded"] = sp_nospace.decode(nospace)
        for name, tok in hf.items():
            enc = tok.encode(text, add_special_tokens=False).ids
            row[name] = {"ids": enc, "ids_special": tok.encode(text, add_special_tokens=True).ids,
                         "decoded": tok.decode(enc, skip_special_tokens=False),
                         "decoded_skip": tok.decode(enc, skip_special_tokens=True)}
            if name == "legacy" and enc != ids:
                differ += 1
                print(f"legacy json and sentencepiece differ on {text!r}: {enc} vs {ids}", file=sys.stderr)
        rows.append(row)
    with open(os.path.join(out_dir, "goldens-spm.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    # sentencepiece's ids (llama.cpp's handling of control tokens) for the byte-level goldens'
    # corpus too, by index, in one compact file.
    with open(os.path.join(root, "internal", "tokenizer", "testdata", "corpus.json")) as f:
        corpus = json.load(f)
    with open(os.path.join(out_dir, "goldens-spm-corpus.json"), "w") as f:
        json.dump([llama_cpp_ids(sp, text) for text in corpus], f, separators=(",", ":"))
        f.write("\n")
    print(f"{len(rows)} strings, {differ} where tokenizers' legacy json and sentencepiece differ")


if __name__ == "__main__":
    main()
