"""Writes the request fields of every trace route Hone serves, as the installed Weave SDK's
request models (weave/vendor/weave_server_sdk/types/*_params.py) declare them, to
internal/trace/testdata/weave_request_fields.json. internal/trace's
TestWeaveRequestFieldsAreKnown checks that Hone's request types know every one.

Run after changing the pinned weave version:
  conformance/weave-py/.venv/bin/python conformance/weave-py/request_fields.py
"""
import importlib
import json
import os
import sys
import typing

import typing_extensions
from typing import get_args, get_origin, get_type_hints

import weave

# route -> (params module, params class); the Go test maps routes to Hone's types.
ROUTES = {
    "/obj/create": ("object_create_params", "ObjectCreateParams"),
    "/obj/read": ("object_read_params", "ObjectReadParams"),
    "/obj/delete": ("object_delete_params", "ObjectDeleteParams"),
    "/objs/query": ("object_query_params", "ObjectQueryParams"),
    "/table/create": ("table_create_params", "TableCreateParams"),
    "/table/update": ("table_update_params", "TableUpdateParams"),
    "/table/create_from_digests": ("table_create_from_digests_params", "TableCreateFromDigestsParams"),
    "/table/query": ("table_query_params", "TableQueryParams"),
    "/table/query_stats": ("table_query_stats_params", "TableQueryStatsParams"),
    "/table/query_stats_batch": ("table_query_stats_batch_params", "TableQueryStatsBatchParams"),
    "/call/start": ("call_start_params", "CallStartParams"),
    "/call/end": ("call_end_params", "CallEndParams"),
    "/call/upsert_batch": ("call_upsert_batch_params", "CallUpsertBatchParams"),
    "/calls/stream_query": ("call_stream_query_params", "CallStreamQueryParams"),
    "/calls/query_stats": ("call_query_stats_params", "CallQueryStatsParams"),
    "/call/read": ("call_read_params", "CallReadParams"),
    "/call/update": ("call_update_params", "CallUpdateParams"),
    "/calls/delete": ("call_delete_params", "CallDeleteParams"),
    "/calls/usage": ("call_usage_params", "CallUsageParams"),
    "/trace/usage": ("trace_usage_params", "TraceUsageParams"),
    "/v2/{entity}/{project}/calls/complete": ("v2_call_complete_params", "V2CallCompleteParams"),
    "/cost/create": ("cost_create_params", "CostCreateParams"),
    "/cost/query": ("cost_query_params", "CostQueryParams"),
    "/cost/purge": ("cost_purge_params", "CostPurgeParams"),
    "/feedback/create": ("feedback_create_params", "FeedbackCreateParams"),
    "/feedback/batch/create": ("feedback_batch_create_params", "FeedbackBatchCreateParams"),
    "/feedback/query": ("feedback_query_params", "FeedbackQueryParams"),
    "/feedback/purge": ("feedback_purge_params", "FeedbackPurgeParams"),
    "/feedback/replace": ("feedback_replace_params", "FeedbackReplaceParams"),
    "/file/content": ("file_content_params", "FileContentParams"),
    "/refs/read_batch": ("ref_read_batch_params", "RefReadBatchParams"),
    "/objs/{object_id}/versions/{digest}/tags": ("objects.tag_add_params", "TagAddParams"),
    "/objs/{object_id}/versions/{digest}/tags/remove": ("objects.tag_remove_params", "TagRemoveParams"),
    "/objs/{object_id}/aliases": ("objects.alias_set_params", "AliasSetParams"),
    "/objs/{object_id}/aliases/remove": ("objects.alias_remove_params", "AliasRemoveParams"),
}
# Path parameters and headers the generated client sends outside the JSON body.
NOT_BODY = {"entity", "object_id", "accept"}


def alias_of(hint):
    for m in getattr(hint, "__metadata__", ()):
        if getattr(m, "alias", None) and m.alias != "None":
            return m.alias
    return None


def merge(a, b):
    """Deep merge of b into a (dicts), for the variants of a union."""
    for k, v in b.items():
        if isinstance(a.get(k), dict) and isinstance(v, dict):
            merge(a[k], v)
        else:
            a[k] = v
    return a


def value_for(tp, depth):
    """A JSON value with every field of tp (TypedDicts recursed, one element per list)."""
    if depth > 8:
        return None
    origin = get_origin(tp)
    if origin in (typing_extensions.Annotated, typing.Annotated, typing_extensions.Required, typing_extensions.NotRequired):
        return value_for(get_args(tp)[0], depth)
    if origin in (typing.Union,) or str(origin) == "types.UnionType":
        dicts = [a for a in get_args(tp) if isinstance(a, type) and typing_extensions.is_typeddict(a)]
        if dicts:
            merged = {}
            for d in dicts:
                merge(merged, value_for(d, depth))
            return merged
        for a in get_args(tp):
            if a is not type(None):
                return value_for(a, depth)
        return None
    if origin in (list, typing.List) or (origin is not None and getattr(origin, "__name__", "") in ("Sequence", "Iterable")):
        (el,) = get_args(tp) or (str,)
        v = value_for(el, depth + 1)
        # A list of alternatives (e.g. table updates) gets one element per alternative.
        if isinstance(v, dict) and len(v) > 1 and all(isinstance(x, dict) for x in v.values()) and "append" in v:
            return [{k: x} for k, x in v.items()]
        return [v]
    if origin in (dict, typing.Dict):
        args = get_args(tp)
        el = args[1] if len(args) == 2 else object
        if isinstance(el, type) and typing_extensions.is_typeddict(el):
            return {"key": value_for(el, depth + 1)}
        return {}
    if isinstance(tp, type) and typing_extensions.is_typeddict(tp):
        if tp.__name__ in ("Query",) or tp.__module__.endswith("shared_params.operation"):
            return {"$expr": {}}
        out = {}
        for k, hint in get_type_hints(tp, include_extras=True).items():
            name = alias_of(hint) or k
            if name in NOT_BODY and depth == 0:
                continue
            out[name] = value_for(hint, depth + 1)
        return out
    if tp is bool:
        return True
    if tp is int:
        return 1
    if tp is float:
        return 1.0
    return "x"


out = {"weave_version": weave.__version__, "routes": {}}
for route, (mod, cls) in ROUTES.items():
    m = importlib.import_module("weave.vendor.weave_server_sdk.types." + mod)
    out["routes"][route] = value_for(getattr(m, cls), 0)
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
path = os.path.join(root, "internal", "trace", "testdata", "weave_request_fields.json")
with open(path, "w") as f:
    json.dump(out, f, indent=1, sort_keys=True, ensure_ascii=False)
    f.write("\n")
print("wrote", os.path.relpath(path, root), file=sys.stderr)
