"""Evaluates a model served by Hone with lm-evaluation-harness (run by cmd/hone's
TestConformanceLMEval), as its users run it against a vLLM server: the local-completions model
on Hone's /v1/completions, with the remote tokenizer (Hone's /tokenizer_info, /tokenize and
/detokenize) instead of a local one, on a multiple-choice task of its own (a local JSON data
set, no download): each choice's log-likelihood comes from echo and logprobs.

Environment: HONE_URL, HONE_KEY, HONE_MODEL (default "demo"). Prints {"ok": true, ...} as its
last line.
"""
import json
import math
import os
import sys
import tempfile

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import lm_eval  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

url, key, model = os.environ["HONE_URL"], os.environ["HONE_KEY"], os.environ.get("HONE_MODEL", "demo")
os.environ["OPENAI_API_KEY"] = key

ROWS = [
    {"country": "France", "choices": ["Paris", "Rome", "Berlin"], "answer": 0},
    {"country": "Italy", "choices": ["Paris", "Rome", "Berlin"], "answer": 1},
    {"country": "Germany", "choices": ["Paris", "Rome", "Berlin"], "answer": 2},
    {"country": "Japan", "choices": ["Tokyo", "Beijing", "Seoul"], "answer": 0},
]

with tempfile.TemporaryDirectory() as d:
    data = os.path.join(d, "capitals.jsonl")
    with open(data, "w") as f:
        for r in ROWS:
            f.write(json.dumps(r) + "\n")
    with open(os.path.join(d, "hone_capitals.yaml"), "w") as f:
        f.write(f"""task: hone_capitals
dataset_path: json
dataset_kwargs:
  data_files:
    test: {data}
test_split: test
output_type: multiple_choice
doc_to_text: "Question: What is the capital of {{{{country}}}}?\\nAnswer:"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - metric: acc
""")
    res = lm_eval.simple_evaluate(
        model="local-completions",
        model_args=f"model={model},base_url={url}/v1/completions,tokenizer_backend=remote,auth_token={key},num_concurrent=1,max_retries=1",
        tasks=["hone_capitals"], task_manager=TaskManager(include_path=d), log_samples=True)

acc = res["results"]["hone_capitals"]["acc,none"]
samples = res["samples"]["hone_capitals"]
lls = [[float(r[0]) for r in s["filtered_resps"]] for s in samples]
assert len(samples) == len(ROWS) and all(len(x) == 3 for x in lls), lls
assert all(math.isfinite(v) and v < 0 for x in lls for v in x), lls
# acc is whether the choice of the highest log-likelihood is the answer.
picked = [max(range(3), key=lambda i: x[i]) for x in lls]
want = sum(p == r["answer"] for p, r in zip(picked, [s["doc"] for s in samples])) / len(ROWS)
assert abs(acc - want) < 1e-9, (acc, want)
print(json.dumps({"ok": True, "acc": acc, "loglikelihoods": lls, "lm_eval_version": lm_eval.__version__}))
sys.stdout.flush()
