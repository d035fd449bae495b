package traceapi_test

import (
	"bytes"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/membudget"
	"github.com/honeai/hone/internal/traceapi"
)

// export posts a /calls/stream_query with an Accept header and answers the status, the
// Content-Type and the body.
func (e *env) export(t *testing.T, accept, body string) (int, string, []byte) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+"/calls/stream_query", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("api:"+e.key)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

func readCSV(t *testing.T, b []byte, comma rune) [][]string {
	t.Helper()
	r := csv.NewReader(bytes.NewReader(b))
	r.Comma = comma
	rows, err := r.ReadAll()
	if err != nil {
		t.Fatalf("not CSV: %v\n%s", err, b)
	}
	return rows
}

// column answers the cells of the column named name (the first row is the header).
func column(t *testing.T, rows [][]string, name string) []string {
	t.Helper()
	i := slices.Index(rows[0], name)
	if i < 0 {
		t.Fatalf("no column %q in %q", name, rows[0])
	}
	var out []string
	for _, r := range rows[1:] {
		out = append(out, r[i])
	}
	return out
}

const tricky = "a, \"quoted\"\nsecond line\twith a tab; ünïcode"

// TestCallsExportFormats: /calls/stream_query answers CSV, TSV or one JSON array by its Accept
// header (the same calls as JSON lines, in the same order, with the same columns, limit and
// offset), JSON lines otherwise; CSV and TSV are quoted by encoding/csv, with a header of the
// calls' flattened paths; exports are bounded.
func TestCallsExportFormats(t *testing.T) {
	e := setup(t)
	seedCalls(t, e, 5, func(i int) int { return (i + 1) * 100 }, func(i int) string {
		if i == 0 {
			msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": tricky}})
			return `{"messages":` + string(msgs) + `,"model":"m,1","cfg":{"t":0.5,"deep":{"x":true},"none":null,"empty":{}}}`
		}
		return `{"i":` + fmt.Sprint(i) + `}`
	})
	const q = `{"project_id":"ent/p","sort_by":[{"field":"summary.weave.total_cost","direction":"desc"}]}`
	code, ct, jl := e.export(t, "", q)
	if code != 200 || ct != "application/jsonl" {
		t.Fatalf("default: %d %s", code, ct)
	}
	lines := jsonLines(t, jl)
	var ids []string
	for _, c := range lines {
		ids = append(ids, c["id"].(string))
	}
	if strings.Join(ids, " ") != "c00004 c00003 c00002 c00001 c00000" {
		t.Fatalf("JSON lines: %v", ids)
	}
	// Any other Accept is JSON lines; the best quality among the export's types wins.
	for accept, want := range map[string]string{
		"text/html": "application/jsonl", "*/*": "application/jsonl", "application/jsonl": "application/jsonl",
		"application/x-ndjson": "application/jsonl", "text/csv;q=0.5, application/json": "application/json",
		"text/html, text/tab-separated-values;q=0.9, text/csv;q=0.8": "text/tab-separated-values; charset=utf-8",
		"TEXT/CSV": "text/csv; charset=utf-8", "text/csv; charset=utf-8": "text/csv; charset=utf-8", "text/csv;q=0": "application/jsonl",
	} {
		if code, ct, _ := e.export(t, accept, q); code != 200 || ct != want {
			t.Errorf("Accept %q: %d %s, want %s", accept, code, ct, want)
		}
	}

	// One JSON array: the same calls.
	code, ct, arr := e.export(t, "application/json", q)
	var calls []map[string]any
	if code != 200 || ct != "application/json" || json.Unmarshal(arr, &calls) != nil || len(calls) != 5 {
		t.Fatalf("JSON: %d %s %s", code, ct, arr)
	}
	for i, c := range calls {
		want, _ := json.Marshal(lines[i])
		got, _ := json.Marshal(c)
		if !bytes.Equal(got, want) {
			t.Errorf("JSON call %d: %s, JSON lines: %s", i, got, want)
		}
	}
	if _, _, b := e.export(t, "application/json", `{"project_id":"ent/p","filter":{"call_ids":["none"]}}`); strings.TrimSpace(string(b)) != "[]" {
		t.Errorf("no calls as JSON: %q", b)
	}

	// CSV: every flattened path, nested values as JSON text, quoted where needed.
	code, ct, b := e.export(t, "text/csv", q)
	if code != 200 || ct != "text/csv; charset=utf-8" {
		t.Fatalf("CSV: %d %s %s", code, ct, b)
	}
	rows := readCSV(t, b, ',')
	if len(rows) != 6 {
		t.Fatalf("CSV rows: %d\n%s", len(rows), b)
	}
	for _, h := range []string{"id", "project_id", "op_name", "started_at", "inputs.messages", "inputs.model", "inputs.cfg.t", "inputs.cfg.deep.x",
		"inputs.cfg.none", "inputs.cfg.empty", "inputs.i", "output.n", "summary.usage.gpt-4o.prompt_tokens", "summary.weave.status", "summary.weave.latency_ms"} {
		if !slices.Contains(rows[0], h) {
			t.Errorf("no column %s in %q", h, rows[0])
		}
	}
	for _, h := range []string{"inputs", "inputs.cfg", "summary", "summary.weave", "inputs.messages.0"} {
		if slices.Contains(rows[0], h) {
			t.Errorf("column %s: objects are flattened, arrays are not: %q", h, rows[0])
		}
	}
	if got := column(t, rows, "id"); strings.Join(got, " ") != strings.Join(ids, " ") {
		t.Errorf("CSV ids %v", got)
	}
	msgs := column(t, rows, "inputs.messages")[4]
	var m []map[string]string
	if json.Unmarshal([]byte(msgs), &m) != nil || m[0]["content"] != tricky {
		t.Errorf("inputs.messages: %q", msgs)
	}
	for name, want := range map[string]string{"inputs.model": "m,1", "inputs.cfg.t": "0.5", "inputs.cfg.deep.x": "true", "inputs.cfg.none": "",
		"inputs.cfg.empty": "{}", "output.n": "0", "summary.weave.status": "success", "inputs.i": "", "summary.usage.gpt-4o.prompt_tokens": "100"} {
		if got := column(t, rows, name)[4]; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if got := column(t, rows, "inputs.i"); strings.Join(got, ",") != "4,3,2,1," {
		t.Errorf("inputs.i = %q", got)
	}
	if !bytes.Contains(b, []byte(`"m,1"`)) || !bytes.HasSuffix(b, []byte("\n")) {
		t.Errorf("CSV quoting: %s", b)
	}

	// columns: the requested paths, in their order, flattened under them; limit and offset.
	_, _, b = e.export(t, "text/csv", `{"project_id":"ent/p","sort_by":[{"field":"summary.weave.total_cost","direction":"desc"}],
		"columns":["id","inputs.messages","summary.weave.status","output","inputs.nope"],"limit":2,"offset":3}`)
	rows = readCSV(t, b, ',')
	if strings.Join(rows[0], "|") != "id|inputs.messages|inputs.nope|summary.weave.status|output.n" || len(rows) != 3 || rows[1][0] != "c00001" || rows[2][0] != "c00000" {
		t.Errorf("CSV with columns: %q", rows)
	}
	if rows[2][1] != msgs || rows[1][1] != "" || rows[2][2] != "" {
		t.Errorf("CSV with columns, cells: %q", rows)
	}

	// TSV: tab-separated, a tab inside a value quoted.
	code, ct, b = e.export(t, "text/tab-separated-values", `{"project_id":"ent/p","columns":["id","inputs.messages"],"filter":{"call_ids":["c00000"]}}`)
	rows = readCSV(t, b, '\t')
	if code != 200 || ct != "text/tab-separated-values; charset=utf-8" || len(rows) != 2 || rows[0][1] != "inputs.messages" || rows[1][1] != msgs ||
		!bytes.HasPrefix(b, []byte("id\tinputs.messages\n")) {
		t.Errorf("TSV: %d %s %q", code, ct, b)
	}
	// No calls: the requested columns' header alone, or nothing.
	if _, _, b := e.export(t, "text/csv", `{"project_id":"ent/p","columns":["id","output"],"filter":{"call_ids":["none"]}}`); string(b) != "id,output\n" {
		t.Errorf("no calls, columns: %q", b)
	}
	if _, _, b := e.export(t, "text/csv", `{"project_id":"ent/p","filter":{"call_ids":["none"]}}`); len(b) != 0 {
		t.Errorf("no calls: %q", b)
	}

	// Errors come in the envelope, before anything is written.
	for _, accept := range []string{"text/csv", "text/tab-separated-values", "application/json"} {
		for body, param := range map[string]string{
			`{"project_id":"ent/p","limit":100001}`:                                                  "limit",
			`{"project_id":"ent/p","query":{"$expr":{"$eq":[{"$getField":"nope"},{"$literal":1}]}}}`: "query",
			`{"project_id":"ent/p","columns":["nope"]}`:                                              "columns[0]",
		} {
			if code, _, b := e.export(t, accept, body); code != 400 || errParam(t, b) != param {
				t.Errorf("%s %s: %d %s, want a 400 naming %s", accept, body, code, b, param)
			}
		}
	}
	if code, _, b := e.export(t, "text/csv", `{"project_id":"other/p"}`); code != 403 {
		t.Errorf("another entity's project: %d %s", code, b)
	}
	// More matching calls than an export answers, without a limit: a 400, never a cut file;
	// with a limit (or an offset past the excess), the calls.
	defer traceapi.SetExportCap(4)()
	for _, accept := range []string{"text/csv", "text/tab-separated-values", "application/json"} {
		if code, _, b := e.export(t, accept, `{"project_id":"ent/p"}`); code != 400 || errParam(t, b) != "limit" || !strings.Contains(string(b), "more than 4 calls match") {
			t.Errorf("%s, 5 calls, at most 4: %d %s", accept, code, b)
		}
		for _, body := range []string{`{"project_id":"ent/p","limit":4}`, `{"project_id":"ent/p","offset":1}`} {
			if code, _, b := e.export(t, accept, body); code != 200 || bytes.Count(b, []byte(`"id":"c0000`))+bytes.Count(b, []byte("\nc0000")) != 4 {
				t.Errorf("%s %s: %d %s, want 4 calls", accept, body, code, b)
			}
		}
	}
	if code, _, b := e.export(t, "application/jsonl", `{"project_id":"ent/p"}`); code != 200 || len(jsonLines(t, b)) != 5 {
		t.Errorf("JSON lines are not bounded: %d", code)
	}
}

// TestCallsExportStreams: a large export (20,000 calls, 9 MB of values) is written as the
// calls are read: three exports at once, in each format, are answered under a memory budget
// for requests of 1 MiB, which holding the calls would exceed (a 503).
func TestCallsExportStreams(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		heavy := httpx.Heavy(membudget.New(1<<20, 256<<10, 200*time.Millisecond), nil)
		e := setupWith(t, d, heavy)
		const n = 20_000
		pad := strings.Repeat("x", 400)
		seedCalls(t, e, n, func(i int) int { return i % 7 }, func(i int) string { return fmt.Sprintf(`{"i":%d,"pad":%q}`, i, pad) })
		for _, c := range []struct {
			accept string
			rows   func(b []byte) []string // the ids
		}{
			{"application/jsonl", func(b []byte) []string {
				var ids []string
				for _, c := range jsonLines(t, b) {
					ids = append(ids, c["id"].(string))
				}
				return ids
			}},
			{"application/json", func(b []byte) []string {
				var calls []struct{ ID string }
				if err := json.Unmarshal(b, &calls); err != nil {
					t.Fatalf("JSON: %v", err)
				}
				var ids []string
				for _, c := range calls {
					ids = append(ids, c.ID)
				}
				return ids
			}},
			{"text/csv", func(b []byte) []string { return column(t, readCSV(t, b, ','), "id") }},
			{"text/tab-separated-values", func(b []byte) []string { return column(t, readCSV(t, b, '\t'), "id") }},
		} {
			// Three at once: a request alone may pass the budget, requests together may not.
			var wg sync.WaitGroup
			var mu sync.Mutex
			var got [][]byte
			for range 3 {
				wg.Go(func() {
					code, _, b := e.export(t, c.accept, `{"project_id":"ent/p","sort_by":[{"field":"id","direction":"desc"}]}`)
					if code != 200 {
						t.Errorf("%s: %d %.300s", c.accept, code, b)
						return
					}
					mu.Lock()
					got = append(got, b)
					mu.Unlock()
				})
			}
			wg.Wait()
			for _, b := range got {
				ids := c.rows(b)
				if len(ids) != n || ids[0] != fmt.Sprintf("c%05d", n-1) || ids[n-1] != "c00000" || len(b) < n*len(pad) {
					t.Errorf("%s: %d calls (%d bytes), first %s", c.accept, len(ids), len(b), ids[0])
				}
			}
		}
	})
}
