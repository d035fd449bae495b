"""Drives a running Hone with the Weave Python SDK (run by cmd/hone's conformance test).

Environment: WF_TRACE_SERVER_URL, WANDB_API_KEY, HONE_PROJECT (<entity>/<project>).
Writes as users do (objects, a dataset, a tree of ops with usage, feedback, an Evaluation with
a scorer), then reads everything back through the SDK as users do (get_calls with op and trace
filters, get_call, children, refs' .get(), a dataset's rows, feedback, the evaluation's calls
and scores), and saves a SavedView of the calls. Prints one JSON object with what it wrote and what it read, for the Go test to
check against the expected answers and against Hone's own endpoints.
"""
import asyncio
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


_, root_call = root.call()

# Feedback on the root call, as users add it.
feedback_ids = [
    root_call.feedback.add_reaction("👍"),
    root_call.feedback.add_note("looks right"),
    root_call.feedback.add("quality", {"score": 3}),
]


# An evaluation: a model that gets "2+3" wrong, scored by an exact-match scorer.
class Adder(weave.Model):
    bias: int = 0

    @weave.op
    def predict(self, question: str) -> int:
        a, b = (int(n) for n in question.split("+"))
        return a + b + (self.bias if a == 2 else 0)


@weave.op
def exact(answer: int, output: int) -> dict:
    return {"correct": answer == output}


evaluation = weave.Evaluation(name="arith-eval", dataset=dataset, scorers=[exact])
eval_summary = asyncio.run(evaluation.evaluate(Adder(bias=1)))
client.flush()

# ---- Read back through the SDK ----
read = {}
read["op_calls"] = [c.id for c in client.get_calls(filter={"op_names": [llm.ref.uri()]})]
trace_calls = list(client.get_calls(filter={"trace_ids": [root_call.trace_id]}))
read["trace_call_ops"] = sorted(c.op_name.split("/op/")[1].split(":")[0] for c in trace_calls)
got = client.get_call(root_call.id)
read["get_call"] = {"id": got.id, "output": got.output, "trace_id": got.trace_id, "parent_id": got.parent_id}
read["children"] = [c.output for c in got.children()]
read["ref1"] = dict(ref1.get())
read["ref2"] = dict(ref2.get())
read["config_latest"] = dict(weave.ref("config").get())
read["dataset_rows"] = [dict(r) for r in weave.ref("arith").get().rows]
read["feedback"] = sorted(
    [{"id": f.id, "type": f.feedback_type, "payload": f.payload} for f in client.get_call(root_call.id).feedback],
    key=lambda f: f["type"],
)
with_feedback = list(client.get_calls(filter={"call_ids": [root_call.id]}, include_feedback=True, include_usernames=True))
read["summary_feedback_types"] = sorted(f["feedback_type"] for f in with_feedback[0].summary["weave"]["feedback"])
read["wb_username"] = with_feedback[0]._val.wb_username if hasattr(with_feedback[0], "_val") else None

eval_calls = list(client.get_calls(filter={"op_names": [evaluation.evaluate.ref.uri()]}))
read["evaluation_output"] = eval_calls[0].output if eval_calls else None
predict_calls = list(client.get_calls(filter={"op_names": [Adder.predict.ref.uri() if Adder.predict.ref else "x"]}))
read["predictions"] = sorted([c.inputs["question"], c.output] for c in predict_calls)
scores = client.get_feedback(query={"$expr": {"$eq": [{"$getField": "feedback_type"}, {"$literal": "wandb.runnable.exact"}]}})
read["scores"] = sorted(json.dumps(f.payload["output"], sort_keys=True) for f in scores)
read["scored_by_exact"] = len(list(client.get_calls(scored_by=["exact"])))

# A saved view of the calls (Hone Studio lists and opens it), loaded back by its ref.
view = weave.SavedView("traces", "llm calls").filter_op("llm").sort_by("started_at", "desc").save()
loaded = weave.SavedView.load(view.ref.uri())
read["saved_view"] = {"object_id": view.ref.name, "label": loaded.label,
                      "op_names": list(loaded.base.definition.filter.op_names or [])}
client.finish()

print(json.dumps({
    "object_digests": [ref1.digest, ref2.digest],
    "dataset_digest": dref.digest,
    "rows": rows,
    "expected_root_usage": {"model-a": {"prompt_tokens": 110, "completion_tokens": 11, "requests": 2},
                             "model-b": {"prompt_tokens": 20, "completion_tokens": 2, "requests": 1}},
    "root_call_id": root_call.id,
    "feedback_ids": feedback_ids,
    "evaluation_summary": eval_summary,
    "read": read,
}, default=str))
sys.stdout.flush()
