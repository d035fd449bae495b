"""The part gen.py, qwen3moe.py and phi3.py share: golden logits of synthetic models computed by
transformers (and peft for the -lora variants) in float64.
"""
import hashlib
import json
import os

import torch
import transformers
from transformers import AutoModelForCausalLM


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def write_goldens(models, out, variants, base, n_tokens, lora_targets, adapter_name, **load_kwargs):
    """For each variant, loads MODELS_DIR/base(variant) (eager attention, load_kwargs added) in
    float64, draws n_tokens(variant) token ids (seeded by the variant's name), and writes
    OUT_DIR/<variant>.json with the ids, the logits at every position and the SHA-256 of the
    weight file. A -lora variant first gets a PEFT adapter on lora_targets with random weights,
    saved under OUT_DIR/adapter_name(variant)/."""
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    for variant in variants:
        d = os.path.join(models, base(variant))
        model = AutoModelForCausalLM.from_pretrained(d, dtype=torch.float32, attn_implementation="eager", **load_kwargs)
        model = model.to(torch.float64).eval()
        vocab = model.config.vocab_size
        g = torch.Generator().manual_seed(len(variant))
        ids = torch.randint(0, vocab, (1, n_tokens(variant)), generator=g)
        extra = {}
        if variant.endswith("-lora"):
            from peft import LoraConfig, get_peft_model

            cfg = LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                             target_modules=lora_targets)
            model = get_peft_model(model, cfg)
            with torch.no_grad():
                for name, p in model.named_parameters():
                    if "lora_" in name:
                        p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64) * 0.1)
            name = adapter_name(variant)
            model.to(torch.float32).save_pretrained(os.path.join(out, name))
            model = model.to(torch.float64)
            extra["adapter"] = name
        with torch.no_grad():
            logits = model(input_ids=ids).logits[0]
        doc = {
            "variant": variant,
            "transformers": transformers.__version__,
            "torch": torch.__version__,
            "weights_sha256": sha256(os.path.join(d, "model.safetensors")),
            "tokens": ids[0].tolist(),
            "logits": [[float("%.9g" % v) for v in row] for row in logits.tolist()],
            **extra,
        }
        with open(os.path.join(out, variant + ".json"), "w") as f:
            json.dump(doc, f, separators=(",", ":"))
        print(variant, "max |logit|", float(logits.abs().max()))
