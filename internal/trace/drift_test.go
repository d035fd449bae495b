package trace

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestUnknownFieldsWalksTheRequestType(t *testing.T) {
	for _, c := range []struct {
		v    any
		body string
		want string // path=value;...
	}{
		// Top level, nested structs, slices of structs, maps of structs, embedded structs.
		{&CallsQueryReq{}, `{"project_id":"e/p","filter":{"op_names":["a"],"new_filter":1},"sort_by":[{"field":"x","direction":"asc","nulls":"last"}],"bogus":{"a":[1]}}`,
			`filter.new_filter=1;sort_by[0].nulls="last";bogus={"a":[1]}`},
		{&ObjCreateReq{}, `{"obj":{"project_id":"e/p","object_id":"o","val":{"anything":{"goes":1}},"new":true}}`, `obj.new=true`},
		{&CostCreateReq{}, `{"project_id":"e/p","costs":{"m":{"prompt_token_cost":1,"tier":"x"}}}`, `costs.m.tier="x"`},
		{&CallsCompleteReq{}, `{"batch":[{"project_id":"e/p","op_name":"o","ended_at":"x","is_new":1}]}`, `batch[0].is_new=1`},
		{&FeedbackBatchCreateReq{}, `{"batch":[{"project_id":"e/p","scorer_ratings":{"any key":1},"future":[]}]}`, `batch[0].future=[]`},
		{&TableUpdateReq{}, `{"project_id":"e/p","updates":[{"append":{"row":{"x":1},"at":2}}]}`, `updates[0].append.at=2`},
		// Free-form values are not walked; wrong types and malformed JSON are the decoder's.
		{&CallStartReq{}, `{"start":{"inputs":{"x":{"y":1}},"attributes":{"weave":{}}}}`, ``},
		{&CallsQueryReq{}, `{"filter":"not an object"}`, ``},
		{&CallsQueryReq{}, `{"filter":`, ``},
	} {
		var got []string
		fields, _ := UnknownFields([]byte(c.body), c.v)
		for _, f := range fields {
			got = append(got, f.Path+"="+string(f.Value))
		}
		if strings.Join(got, ";") != c.want {
			t.Errorf("%T %s:\n got  %s\n want %s", c.v, c.body, strings.Join(got, ";"), c.want)
		}
	}
}

func TestUnknownFieldsErrorNamesThem(t *testing.T) {
	err := UnknownFieldsError([]UnknownField{{Path: "filter.x"}, {Path: "y"}})
	if !strings.Contains(err.Error(), "`filter.x`, `y`") {
		t.Fatal(err)
	}
	if e, _ := err.(interface{ Error() string }); e == nil {
		t.Fatal("nil")
	}
}

// FuzzUnknownFields: any body gives unknown fields with non-empty paths and valid JSON values,
// every one absent from the type, and a body without unknown fields gives none.
func FuzzUnknownFields(f *testing.F) {
	for _, s := range []string{
		`{"project_id":"e/p","filter":{"op_names":["a"],"new_filter":1},"sort_by":[{"field":"x","nulls":"last"}]}`,
		`{"batch":[{"mode":"start","req":{"start":{"op_name":"o","x":[1,{"y":2}]}}}]}`,
		`{"obj":{"val":{"a":{"b":[1,2,3]}},"z":null}}`,
		`[]`, `{}`, `{"filter":{"filter":{"filter":1}}}`,
	} {
		f.Add(s)
	}
	types := []any{&CallsQueryReq{}, &CallCreateBatchReq{}, &ObjCreateReq{}, &FeedbackBatchCreateReq{}, &CostCreateReq{}, &CallsCompleteReq{}}
	f.Fuzz(func(t *testing.T, body string) {
		for _, v := range types {
			fields, err := UnknownFields([]byte(body), v)
			if err != nil && fields != nil {
				t.Fatal("fields with an error")
			}
			for _, u := range fields {
				if u.Path == "" || !json.Valid(u.Value) {
					t.Fatalf("%T: bad unknown field %+v", v, u)
				}
			}
		}
		// Removing the top-level fields reported leaves none of them unknown.
		var m map[string]json.RawMessage
		v := &CallsQueryReq{}
		if fields, err := UnknownFields([]byte(body), v); err == nil && json.Unmarshal([]byte(body), &m) == nil {
			for _, u := range fields {
				delete(m, u.Path)
				if u.Path == `""` {
					delete(m, "")
				}
			}
			b, _ := json.Marshal(m)
			after, _ := UnknownFields(b, v)
			for _, u := range after {
				if _, top := m[u.Path]; top {
					t.Fatalf("top-level %q still unknown after removal (%s)", u.Path, fmt.Sprint(m))
				}
			}
		}
	})
}

// TestWeaveRequestFieldsAreKnown: Hone's request types know every field of every request the
// pinned Weave SDK's request models declare, on every route Hone serves
// (testdata/weave_request_fields.json, written by conformance/weave-py/request_fields.py).
func TestWeaveRequestFieldsAreKnown(t *testing.T) {
	b, err := os.ReadFile("testdata/weave_request_fields.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Version string                     `json:"weave_version"`
		Routes  map[string]json.RawMessage `json:"routes"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	types := map[string]any{
		"/obj/create": &ObjCreateReq{}, "/obj/read": &ObjReadReq{}, "/obj/delete": &ObjDeleteReq{}, "/objs/query": &ObjQueryReq{},
		"/table/create": &TableCreateReq{}, "/table/update": &TableUpdateReq{}, "/table/create_from_digests": &TableCreateFromDigestsReq{},
		"/table/query": &TableQueryReq{}, "/table/query_stats": &TableQueryStatsReq{}, "/table/query_stats_batch": &TableQueryStatsBatchReq{},
		"/call/start": &CallStartReq{}, "/call/end": &CallEndReq{}, "/calls/stream_query": &CallsQueryReq{},
		"/calls/query_stats": &CallsQueryStatsReq{}, "/call/read": &CallReadReq{}, "/call/update": &CallUpdateReq{},
		"/calls/delete": &CallsDeleteReq{}, "/calls/usage": &CallsUsageReq{}, "/trace/usage": &TraceUsageReq{},
		"/v2/{entity}/{project}/calls/complete": &CallsCompleteReq{}, "/cost/create": &CostCreateReq{}, "/cost/query": &CostQueryReq{},
		"/cost/purge": &CostPurgeReq{}, "/feedback/create": &FeedbackCreateReq{}, "/feedback/batch/create": &FeedbackBatchCreateReq{},
		"/feedback/query": &FeedbackQueryReq{}, "/feedback/purge": &FeedbackPurgeReq{}, "/feedback/replace": &FeedbackReplaceReq{},
		"/file/content": &FileContentReadReq{}, "/refs/read_batch": &RefsReadBatchReq{},
		"/objs/{object_id}/versions/{digest}/tags": &TagsReq{}, "/objs/{object_id}/versions/{digest}/tags/remove": &TagsReq{},
		"/objs/{object_id}/aliases": &AliasesSetReq{}, "/objs/{object_id}/aliases/remove": &AliasesRemoveReq{},
	}
	for route, body := range doc.Routes {
		var unknown []UnknownField
		if route == "/call/upsert_batch" {
			_, unknown, err = DecodeCallBatch(body)
		} else {
			v, ok := types[route]
			if !ok {
				t.Errorf("weave %s: no Hone type for %s", doc.Version, route)
				continue
			}
			unknown, err = UnknownFields(body, v)
		}
		if err != nil {
			t.Errorf("%s: %v", route, err)
		}
		for _, u := range unknown {
			t.Errorf("weave %s sends %s on %s: Hone does not know it", doc.Version, u.Path, route)
		}
	}
	if len(doc.Routes) < len(types) {
		t.Errorf("%d routes in the file, want at least %d", len(doc.Routes), len(types))
	}
}
