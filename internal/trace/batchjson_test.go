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

// A batch large enough to be decoded on several cores gives what encoding/json gives, its
// unknown fields in item order, and the error of the first bad item.
func TestDecodeCallBatchParallel(t *testing.T) {
	items := strings.TrimSuffix(strings.TrimPrefix(sampleBatch, `{"batch":[`), `]}`)
	var sb strings.Builder
	sb.WriteString(`{"batch":[`)
	const n = 100 // times two items
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(strings.ReplaceAll(items, `"c1"`, `"c`+strings.Repeat("x", i)+`"`))
	}
	sb.WriteString(`]}`)
	body := sb.String()
	got, unknown, err := DecodeCallBatch([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(unknown) != n {
		t.Fatalf("%d unknown fields, want %d", len(unknown), n)
	}
	for i, u := range unknown {
		if want := "batch[" + itoa(2*i) + "].req.start.extra"; u.Path != want {
			t.Fatalf("unknown[%d] = %s, want %s", i, u.Path, want)
		}
	}
	var want CallCreateBatchReq
	if err := json.Unmarshal([]byte(body), &want); err != nil {
		t.Fatal(err)
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		t.Fatalf("parallel decode differs from encoding/json")
	}
	// Two bad items: the first is reported, wherever the parts split.
	bad := strings.Replace(body, `"wb_run_step":3`, `"wb_run_step":"x"`, 1)
	bad = strings.Replace(bad, `"wb_run_step":3`, `"wb_run_step":"y"`, 170-1)
	_, _, err = DecodeCallBatch([]byte(bad))
	if err == nil || !strings.Contains(err.Error(), "batch[0].req.start.wb_run_step") {
		t.Fatalf("err = %v, want batch[0]'s", err)
	}
	bad = strings.Replace(body, `"wb_run_step_end":4`, `"wb_run_step_end":"z"`, -1)
	bad = strings.Replace(bad, `"wb_run_step_end":"z"`, `"wb_run_step_end":4`, 60)
	_, _, err = DecodeCallBatch([]byte(bad))
	if err == nil || !strings.Contains(err.Error(), "batch[121].req.end.wb_run_step_end") {
		t.Fatalf("err = %v, want batch[121]'s", err)
	}
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
