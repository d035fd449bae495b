"""Drives a running Hone with the Weave Python SDK (run by cmd/hone's conformance test).

Environment: WF_TRACE_SERVER_URL, WANDB_API_KEY, HONE_PROJECT (<entity>/<project>).
Prints one JSON object describing what the SDK wrote, for the test to check against Hone's
own endpoints.
"""
import json
import os
import sys

import weave

project = os.environ["HONE_PROJECT"]
client = weave.init(project)

ref1 = weave.publish({"temperature": 0.5, "prompt": "v1"}, name="config")
ref2 = weave.publish({"temperature": 0.7, "prompt": "v2"}, name="config")

rows = [{"question": "1+1", "answer": 2}, {"question": "2+3", "answer": 5}, {"question": "1+1", "answer": 2}]
dataset = weave.Dataset(name="arith", rows=rows)
dref = weave.publish(dataset)


@weave.op
def llm(prompt: str, model: str, p: int, c: int) -> str:
    call = weave.get_current_call()
    call.summary["usage"] = {model: {"prompt_tokens": p, "completion_tokens": c, "requests": 1}}
    return "ok:" + prompt


@weave.op
def step(x: int) -> str:
    llm("a", "model-a", 10, 1)
    llm("b", "model-b", 20, 2)
    return "step"


@weave.op
def root() -> str:
    step(1)
    llm("c", "model-a", 100, 10)
    return "root"


root()
client.finish()
print(json.dumps({
    "object_digests": [ref1.digest, ref2.digest],
    "dataset_digest": dref.digest,
    "rows": rows,
    "expected_root_usage": {"model-a": {"prompt_tokens": 110, "completion_tokens": 11, "requests": 2},
                             "model-b": {"prompt_tokens": 20, "completion_tokens": 2, "requests": 1}},
}))
sys.stdout.flush()
