package trace

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/apierror"
)

const sampleBatch = `{"batch":[
 {"mode":"start","req":{"start":{"project_id":"e/p","id":"c1","trace_id":"t","parent_id":null,"op_name":"op","display_name":"d",
  "thread_id":"th","turn_id":"tu","started_at":"2026-01-01T00:00:00Z","attributes":{"weave":{"source":"js-sdk"}},"inputs":{"a":[1,2.5,"x"]},
  "wb_user_id":"u","wb_run_id":"r","wb_run_step":3,"extra":"ignored"}}},
 {"mode":"end","req":{"end":{"project_id":"e/p","id":"c1","ended_at":"2026-01-01T00:00:01Z","exception":"boom","output":{"o":null},
  "summary":{"usage":{"m":{"prompt_tokens":1}}},"display_name":"d2","wb_run_step_end":4}}}]}`

// The one-pass decoder gives what encoding/json gives.
func TestDecodeCallBatchMatchesEncodingJSON(t *testing.T) {
	got, unknown, err := DecodeCallBatch([]byte(sampleBatch))
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown) != 1 || unknown[0].Path != "batch[0].req.start.extra" || string(unknown[0].Value) != `"ignored"` {
		t.Fatalf("unknown fields = %+v, want batch[0].req.start.extra", unknown)
	}
	var want CallCreateBatchReq
	if err := json.Unmarshal([]byte(sampleBatch), &want); err != nil {
		t.Fatal(err)
	}
	norm := func(r CallCreateBatchReq) string {
		b, _ := json.Marshal(r)
		var v any
		_ = json.Unmarshal(b, &v)
		out, _ := json.Marshal(v)
		return string(out)
	}
	if norm(got) != norm(want) {
		t.Fatalf("got  %s\nwant %s", norm(got), norm(want))
	}
	if !reflect.DeepEqual(*got.Batch[0].Req.Start.WBRunStep, int64(3)) {
		t.Fatal("wb_run_step")
	}
}

func TestDecodeCallBatchErrors(t *testing.T) {
	for body, param := range map[string]string{
		`{"batch":{}}`:           "batch",
		`{"batch":[{"mode":1}]}`: "batch[0].mode",
		`{"batch":[{"mode":"start","req":{"start":{"started_at":5}}}]}`:    "batch[0].req.start.started_at",
		`{"batch":[{"mode":"end","req":{"end":{"wb_run_step_end":"x"}}}]}`: "batch[0].req.end.wb_run_step_end",
		`{"batch":[{"mode":"end","req":{"end":{"wb_run_step_end":1.5}}}]}`: "batch[0].req.end.wb_run_step_end",
		`{"batch":[{"mode":"start","req":{"start":[]}}]}`:                  "batch[0].req.start",
		`[1]`:        "",
		`{"batch":[`: "",
	} {
		_, _, err := DecodeCallBatch([]byte(body))
		e, ok := apierror.As(err)
		if !ok || e.Status != 400 || e.Param != param {
			t.Errorf("%s: %v (param %q), want 400 naming %q", body, err, e.Param, param)
		}
	}
}

func FuzzDecodeCallBatch(f *testing.F) {
	f.Add(sampleBatch)
	f.Add(`{"batch":[{"mode":"end","req":{"end":null}}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		req, unknown, err := DecodeCallBatch([]byte(body))
		if err != nil {
			if _, ok := apierror.As(err); !ok {
				t.Fatalf("non-API error %v", err)
			}
			return
		}
		for _, u := range unknown {
			if u.Path == "" || !json.Valid(u.Value) {
				t.Fatalf("bad unknown field %+v", u)
			}
		}
		for _, it := range req.Batch {
			if st := it.Req.Start; st != nil {
				for _, r := range []json.RawMessage{st.Inputs, st.Attributes, st.OtelDump} {
					if len(r) > 0 && (!json.Valid(r) || strings.Contains(string(r), "\n")) {
						t.Fatalf("raw value not compact valid JSON: %q", r)
					}
				}
			}
		}
	})
}
