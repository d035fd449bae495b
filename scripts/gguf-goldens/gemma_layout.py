"""Layout golden for Hone's gemma2/gemma3 GGUF export: what llama.cpp's convert_hf_to_gguf.py
(--outtype f32) writes for the Gemma fixtures of internal/export/gemma_test.go: its metadata
(all but GGUF.*, the descriptive general.* keys and the vocabulary's three arrays) and each
tensor's name, dimensions (GGUF order), type and the SHA-256 of its bytes.
TestExportGGUFGemmaMatchesConverter compares Hone's export of the same fixtures with it.

Usage (gemma_layout.sh does all of it):
    python gemma_layout.py LLAMA_CPP_SRC FIXTURES OUT.json
FIXTURES holds gemma2/ and gemma3/ (TestWriteGemmaFixtures). As in phi3_layout.py,
config.json is read as it is (transformers 5's AutoConfig moves rope_theta into
rope_parameters, which the converter predates) and mistral_common is stubbed when missing.
"""
import hashlib
import importlib.util
import json
import os
import sys
import tempfile

KEEP_GENERAL = {"general.architecture", "general.file_type", "general.quantization_version", "general.type"}
SKIP = {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}


def main():
    src, fixtures, out = sys.argv[1:4]
    here = os.path.dirname(os.path.abspath(__file__))
    spec = importlib.util.spec_from_file_location("phi3_layout", os.path.join(here, "phi3_layout.py"))
    phi3 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(phi3)
    sys.path[:0] = [src, os.path.join(src, "gguf-py")]
    phi3.stub_mistral_common()
    import convert_hf_to_gguf as conv
    import gguf

    conv.ModelBase.load_hparams = staticmethod(lambda d, *a: json.load(open(d / "config.json")))
    result = {}
    for arch in ("gemma2", "gemma3"):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, arch + ".gguf")
            sys.argv = ["convert_hf_to_gguf.py", os.path.join(fixtures, arch), "--outtype", "f32", "--outfile", path]
            conv.main()
            r = gguf.GGUFReader(path)
            meta = {}
            for k, f in r.fields.items():
                if k.startswith("GGUF.") or k in SKIP or (k.startswith("general.") and k not in KEEP_GENERAL):
                    continue
                meta[k] = f.contents()
            tensors = [[t.name, [int(x) for x in t.shape], t.tensor_type.name,
                        hashlib.sha256(bytes(t.data.tobytes())).hexdigest()] for t in r.tensors]
            result[arch] = {"metadata": meta, "tensors": tensors}
    with open(out, "w") as fh:
        json.dump({"converter": "llama.cpp convert_hf_to_gguf.py --outtype f32", **result}, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
