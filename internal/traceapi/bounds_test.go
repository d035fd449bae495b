package traceapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/trace"
)

// TestRefsReadBatchBounded: one stored 1 MiB object named 400 times in a small request is a
// 413 naming the limit, not gigabytes of memory; a batch over MaxRefsPerBatch is a 413 too,
// and a batch within both bounds still answers.
func TestRefsReadBatchBounded(t *testing.T) {
	e := setup(t)
	big := `{"s":"` + strings.Repeat("x", 1<<20) + `"}`
	res, err := e.svc.ObjCreate(context.Background(), trace.ObjCreateReq{Obj: trace.ObjSchemaForInsert{ProjectID: "ent/p", ObjectID: "big", Val: json.RawMessage(big)}}, "")
	if err != nil {
		t.Fatal(err)
	}
	ref := fmt.Sprintf("weave:///ent/p/object/big:%s", res.Digest)
	refs := make([]string, 400)
	for i := range refs {
		refs[i] = ref
	}
	body, _ := json.Marshal(map[string]any{"refs": refs})

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	code, out := e.call(t, "POST", "/refs/read_batch", e.key, string(body))
	runtime.ReadMemStats(&after)
	if code != 413 || !strings.Contains(string(out), fmt.Sprint(trace.MaxRefsBatchBytes)) || errParam(t, out) != "refs" {
		t.Fatalf("400 refs to a 1 MiB object: %d %.300s", code, out)
	}
	// Before the bound the server allocated about 5.5 MB per ref (2.2 GB here).
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 400<<20 {
		t.Fatalf("read_batch allocated %d MB before refusing", alloc>>20)
	}

	code, out = e.call(t, "POST", "/refs/read_batch", e.key, string(mustJSON(map[string]any{"refs": refs[:3]})))
	if code != 200 || len(out) < 3<<20 {
		t.Fatalf("3 refs: %d, %d bytes", code, len(out))
	}

	many := make([]string, trace.MaxRefsPerBatch+1)
	for i := range many {
		many[i] = "weave:///ent/p/object/o:x"
	}
	code, out = e.call(t, "POST", "/refs/read_batch", e.key, string(mustJSON(map[string]any{"refs": many})))
	if code != 413 || !strings.Contains(string(out), fmt.Sprint(trace.MaxRefsPerBatch)) {
		t.Fatalf("%d refs: %d %.300s", len(many), code, out)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestCallsQueryManyIDs: a calls query naming more call ids than SQLite (32,766) or
// PostgreSQL (65,535) allow variables in one statement still answers.
func TestCallsQueryManyIDs(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		e := setupOn(t, d)
		for _, id := range []string{"c1", "c2"} {
			code, out := e.call(t, "POST", "/call/start", e.key, `{"start":{"project_id":"ent/p","id":"`+id+`","trace_id":"t1","op_name":"op","started_at":"2026-01-01T00:00:00Z","attributes":{},"inputs":{}}}`)
			if code != 200 {
				t.Fatalf("%d %s", code, out)
			}
		}
		ids := make([]string, 70_000)
		for i := range ids {
			ids[i] = fmt.Sprintf("x%d", i)
		}
		ids[123], ids[69_999] = "c2", `c1`
		code, out := e.call(t, "POST", "/calls/query", e.key, string(mustJSON(map[string]any{"project_id": "ent/p", "filter": map[string]any{"call_ids": ids}})))
		var r struct {
			Calls []struct{ ID string } `json:"calls"`
		}
		_ = json.Unmarshal(out, &r)
		if code != 200 || len(r.Calls) != 2 {
			t.Fatalf("70,000 call_ids: %d %.300s", code, out)
		}
	})
}
