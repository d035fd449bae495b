package trace

import (
	"encoding/json"
	"fmt"
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
