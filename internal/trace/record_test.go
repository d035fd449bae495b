package trace

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// TestRecordCall: a call Hone records itself is written whole: inputs, output, summary with
// its usage, exception and user, under a fresh trace.
func TestRecordCall(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		s := newService(t, d)
		ctx := context.Background()
		t0 := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
		id, err := s.RecordCall(ctx, RecordedCall{Project: "e/p", OpName: "op", Started: t0, Ended: t0.Add(time.Second),
			Attributes: map[string]any{"a": 1}, Inputs: raw(`{"x":1}`), Output: raw(`"out"`),
			Summary:   map[string]any{"usage": map[string]any{"m": map[string]any{"requests": 1, "prompt_tokens": 3}}},
			Exception: "cut short", UserID: "u1"})
		if err != nil {
			t.Fatal(err)
		}
		rd, err := s.CallRead(ctx, CallReadReq{ProjectID: "e/p", ID: id})
		if err != nil || rd.Call == nil {
			t.Fatalf("read: %v", err)
		}
		c := rd.Call
		if c.OpName != "op" || *c.Exception != "cut short" || *c.WBUserID != "u1" || string(c.Output) != `"out"` ||
			!strings.Contains(string(c.Summary), `"prompt_tokens":3`) || !strings.Contains(string(c.Attributes), `"a":1`) {
			t.Fatalf("call %+v", c)
		}
		ids, err := s.RecordCalls(ctx, []RecordedCall{{Project: "e/p", OpName: "a", Inputs: raw(`not json`)}, {Project: "e/p", OpName: "b"}})
		if err != nil || len(ids) != 2 || ids[0] == ids[1] {
			t.Fatalf("two calls: %v %v", ids, err)
		}
		if rd, _ := s.CallRead(ctx, CallReadReq{ProjectID: "e/p", ID: ids[0]}); string(rd.Call.Inputs) != `{}` {
			t.Fatalf("invalid inputs kept: %s", rd.Call.Inputs)
		}
	})
}

// TestDatasetRows: a table's rows, and a Dataset object's through its rows table, in order,
// past one page.
func TestDatasetRows(t *testing.T) {
	s := newService(t, dbtest.SQLite(t))
	ctx := context.Background()
	var rows []json.RawMessage
	for i := range 1203 {
		b, _ := json.Marshal(map[string]int{"i": i})
		rows = append(rows, b)
	}
	tbl, err := s.TableCreate(ctx, TableCreateReq{Table: TableSchemaForInsert{ProjectID: "e/p", Rows: rows}})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := s.ObjCreate(ctx, ObjCreateReq{Obj: ObjSchemaForInsert{ProjectID: "e/p", ObjectID: "ds",
		Val: raw(`{"_type":"Dataset","_class_name":"Dataset","_bases":["Object","BaseModel"],"rows":"weave:///e/p/table/` + tbl.Digest + `"}`)}}, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []Ref{{Entity: "e", Project: "p", Kind: "table", Digest: tbl.Digest}, {Entity: "e", Project: "p", Kind: "object", Name: "ds", Digest: obj.Digest}} {
		got, err := s.DatasetRows(ctx, ref)
		if err != nil || len(got) != len(rows) || string(got[0]) != `{"i":0}` || string(got[1202]) != `{"i":1202}` {
			t.Fatalf("%+v: %d rows, %v", ref, len(got), err)
		}
	}
	plain, _ := s.ObjCreate(ctx, ObjCreateReq{Obj: ObjSchemaForInsert{ProjectID: "e/p", ObjectID: "cfg", Val: raw(`{"t":1}`)}}, "")
	if _, err := s.DatasetRows(ctx, Ref{Entity: "e", Project: "p", Kind: "object", Name: "cfg", Digest: plain.Digest}); err == nil || !strings.Contains(err.Error(), "not a dataset") {
		t.Fatalf("an object without rows: %v", err)
	}
}
