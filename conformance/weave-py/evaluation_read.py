"""Reads an evaluation Hone ran (POST /v1/preview/evaluation-jobs) back through the Weave SDK.

argv[1] is the Evaluation's ref; HONE_PROJECT is the project. It prints one JSON line: the
Evaluation object (name, its dataset's rows, its scorers' names), the Evaluation.evaluate
calls and the first one's summary, its children's ops, the predict-and-score calls' examples
(the SDK resolves the row refs), the scorers' feedback and the calls scored_by a scorer.
"""

import json
import os
import sys

import weave

client = weave.init(os.environ["HONE_PROJECT"])
ref = sys.argv[1]
project = os.environ["HONE_PROJECT"]

# objectify=False: weave.Evaluation.from_obj imports weave.scorers, whose extra packages
# (weave[scorers]) this environment does not install; the stored value is the same.
ev = weave.ref(ref).get(objectify=False)
rows = [dict(r) for r in ev.dataset.rows]
scorers = [s.name for s in ev.scorers]

evaluate = list(client.get_calls(filter={"op_names": [f"weave:///{project}/op/Evaluation.evaluate:*"]}))
children = list(evaluate[0].children())
pas = [c for c in children if "predict_and_score" in c.op_name]
fb = list(client.get_feedback(query={"$expr": {"$eq": [{"$getField": "feedback_type"}, {"$literal": f"wandb.runnable.{scorers[0]}"}]}}))
scored = list(client.get_calls(scored_by=[scorers[0]]))
client.finish()

print(json.dumps({
    "Name": ev.name,
    "DatasetType": type(ev.dataset).__name__,
    "Rows": rows,
    "Scorers": scorers,
    "Evaluations": len(evaluate),
    "Summary": json.loads(json.dumps(evaluate[0].output, default=lambda o: dict(o))),
    "Children": sorted(c.op_name.split("/op/")[1].split(":")[0] for c in children),
    "Examples": [dict(c.inputs["example"]) for c in pas],
    "Feedback": len(fb),
    "ScoredBy": len(scored),
}, default=str))
sys.stdout.flush()
