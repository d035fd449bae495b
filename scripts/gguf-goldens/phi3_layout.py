"""Layout golden for Hone's phi3 GGUF export: what llama.cpp's convert_hf_to_gguf.py writes for
a synthetic Phi-4-mini shape (partial_rotary_factor 0.75, tied embeddings, LongRoPE, a sliding
window of 16): general.architecture and the phi3.* metadata, and each tensor's name, dimensions
(GGUF order) and type. internal/model's TestPhi3GGUFLayoutMatchesLlamaCpp compares the GGUF
metadata and tensor names Hone's export writes (model.GGUFMetadata, model.GGUFTensorName) for
the same model with it.

Usage (phi3_layout.sh does all of it):
    python phi3_layout.py LLAMA_CPP_SRC MODEL_DIR OUT.json
LLAMA_CPP_SRC is a llama.cpp source tree (convert_hf_to_gguf.py and gguf-py). Two things are
patched around the converter, neither of which touches the phi3 layout: the BPE pre-tokenizer
check (a synthetic tokenizer has no known hash; "qwen2" is recorded) and config.json is read as
it is (transformers 5's AutoConfig moves rope_theta, which the converter predates, into
rope_parameters); mistral_common, imported but unused for Phi-3, is stubbed when missing.
"""
import importlib.machinery
import json
import os
import shutil
import sys
import tempfile
import types


def stub_mistral_common():
    try:
        import mistral_common  # noqa: F401
        return
    except ImportError:
        pass
    names = {
        "mistral_common.tokens.tokenizers.base": {"TokenizerVersion": type("TokenizerVersion", (), {})},
        "mistral_common.tokens.tokenizers.multimodal": {"DATASET_MEAN": None, "DATASET_STD": None},
        "mistral_common.tokens.tokenizers.tekken": {"Tekkenizer": type("Tekkenizer", (), {})},
        "mistral_common.tokens.tokenizers.sentencepiece": {"SentencePieceTokenizer": type("SentencePieceTokenizer", (), {})},
    }
    for full in ["mistral_common", "mistral_common.tokens", "mistral_common.tokens.tokenizers", *names]:
        mod = types.ModuleType(full)
        mod.__path__ = []
        mod.__spec__ = importlib.machinery.ModuleSpec(full, None, is_package=True)
        for k, v in names.get(full, {}).items():
            setattr(mod, k, v)
        sys.modules[full] = mod


def main():
    src, model_dir, out = sys.argv[1:4]
    sys.path[:0] = [src, os.path.join(src, "gguf-py")]
    stub_mistral_common()
    import convert_hf_to_gguf as conv
    import gguf

    conv.ModelBase.load_hparams = staticmethod(lambda d, *a: json.load(open(d / "config.json")))
    conv.TextModel.get_vocab_base_pre = lambda self, tokenizer: "qwen2"
    with tempfile.TemporaryDirectory() as tmp:
        d = os.path.join(tmp, "model")
        shutil.copytree(model_dir, d)
        tc = os.path.join(d, "tokenizer_config.json")
        cfg = json.load(open(tc))
        cfg["tokenizer_class"] = "GPT2Tokenizer"  # the converter's Phi-3 vocabulary path for BPE
        json.dump(cfg, open(tc, "w"))
        path = os.path.join(tmp, "model.gguf")
        sys.argv = ["convert_hf_to_gguf.py", d, "--outtype", "f32", "--outfile", path]
        conv.main()
        r = gguf.GGUFReader(path)
        meta = {}
        for k, f in r.fields.items():
            if k == "general.architecture" or k.startswith("phi3."):
                v = f.contents()
                meta[k] = v
        tensors = [[t.name, [int(x) for x in t.shape], t.tensor_type.name] for t in r.tensors]
    with open(out, "w") as fh:
        json.dump({"converter": "llama.cpp convert_hf_to_gguf.py", "metadata": meta, "tensors": tensors}, fh, indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
