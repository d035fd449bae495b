"""Reads, with the Weave Python SDK, Datasets that Hone built from traced chat completions
(POST /v1/preview/datasets/from-calls); run by cmd/hone's TestConformanceWeavePythonFromCalls.

Environment: WF_TRACE_SERVER_URL, WANDB_API_KEY, HONE_PROJECT (<entity>/<project>), as
scenario.py. Arguments: refs as users pass them to weave.ref (a full weave:/// object ref, or
an object's name). Prints one JSON object {"read": {ref: {"class", "name", "rows"}}}, the
rows as plain JSON, for the Go test to compare with the rows Hone wrote.
"""
import json
import os
import sys

import weave


def plain(v):
    """The SDK's row values (WeaveDict, WeaveList, ...) as plain JSON values."""
    if hasattr(v, "items"):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    return v


weave.init(os.environ["HONE_PROJECT"])
read = {}
for ref in sys.argv[1:]:
    ds = weave.ref(ref).get()
    read[ref] = {"class": type(ds).__name__, "name": ds.name, "rows": [plain(r) for r in ds.rows]}
print(json.dumps({"read": read}))
