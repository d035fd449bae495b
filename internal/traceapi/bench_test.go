package traceapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/honeai/hone/internal/cputime"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/trace"
)

// Benchmarks of the trace routes over real HTTP on a real SQLite file; the figures and the
// commands are in docs/performance.md. Run with:
//
//	go test -run xxx -bench . -benchtime 3x ./internal/traceapi/

func (e *env) mustPost(b testing.TB, path, body string) []byte {
	b.Helper()
	req, _ := http.NewRequest("POST", e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.SetBasicAuth("api", e.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != 200 {
		b.Fatalf("%s: %d %.300s", path, resp.StatusCode, buf.String())
	}
	return buf.Bytes()
}

// callBatch is an upsert_batch body of n calls (start and end each), with usage, chained or
// in a 100-ary tree under the first call of the trace.
func callBatch(project, trace string, first, n int, shape string) string {
	var sb strings.Builder
	sb.WriteString(`{"batch":[`)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := first; i < first+n; i++ {
		if i > first {
			sb.WriteByte(',')
		}
		parent := "null"
		if i > 0 {
			p := i - 1
			if shape == "wide" {
				p = (i - 1) / 100
			}
			parent = fmt.Sprintf(`"%s-%d"`, trace, p)
		}
		at := t0.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)
		fmt.Fprintf(&sb, `{"mode":"start","req":{"start":{"project_id":%q,"id":"%s-%d","trace_id":%q,"parent_id":%s,"op_name":"weave:///%s/op/llm:abc","started_at":%q,"attributes":{},"inputs":{"prompt":"question %d","temperature":0.7}}}},`,
			project, trace, i, trace, parent, project, at, i)
		fmt.Fprintf(&sb, `{"mode":"end","req":{"end":{"project_id":%q,"id":"%s-%d","ended_at":%q,"output":{"text":"answer %d"},"summary":{"usage":{"gpt-4o":{"prompt_tokens":%d,"completion_tokens":%d,"requests":1}}}}}}`,
			project, trace, i, at, i, 10+i%7, 5+i%3)
	}
	sb.WriteString(`]}`)
	return sb.String()
}

// stores are the stores the ingest and usage benchmarks run on: a real SQLite file, and a
// fresh PostgreSQL schema when HONE_TEST_POSTGRES_DSN names a server (skipped otherwise).
var stores = []struct {
	name string
	open func(testing.TB) *db.DB
}{{"sqlite", dbtest.SQLite}, {"postgres", dbtest.Postgres}}

// BenchmarkIngestUpsertBatch posts 100,000 calls (start and end each, with usage) in batches of
// 1,000 to /call/upsert_batch over HTTP. Only the posts are timed: each iteration's bodies (new
// ids) are built before its clock starts.
func BenchmarkIngestUpsertBatch(b *testing.B) {
	const calls, per = 100000, 1000
	base := make([]string, calls/per)
	for i := range base {
		base[i] = callBatch("ent/ingest", "tr", i*per, per, "chain")
	}
	for _, st := range stores {
		b.Run(st.name, func(b *testing.B) {
			e := setupOn(b, st.open(b))
			var elapsed time.Duration
			var cpu float64
			for it := 0; it < b.N; it++ {
				b.StopTimer()
				bodies := base
				if it > 0 { // new ids each iteration
					bodies = make([]string, len(base))
					for i, body := range base {
						bodies[i] = strings.ReplaceAll(body, `"tr-`, fmt.Sprintf(`"tr%d-`, it))
					}
				}
				b.StartTimer()
				start, cpu0 := time.Now(), cputime.Seconds()
				for _, body := range bodies {
					e.mustPost(b, "/call/upsert_batch", body)
				}
				elapsed += time.Since(start)
				cpu += cputime.Seconds() - cpu0
			}
			b.ReportMetric(float64(calls*b.N)/elapsed.Seconds(), "calls/s")
			// CPU time of the process per call (server and client, all threads, µs).
			b.ReportMetric(cpu*1e6/float64(calls*b.N), "cpu-µs/call")
		})
	}
}

func loadTrace(b *testing.B, e *env, project, shape string) {
	for i := 0; i < 10000; i += 1000 {
		e.mustPost(b, "/call/upsert_batch", callBatch(project, shape, i, 1000, shape))
	}
}

func BenchmarkTraceUsage10k(b *testing.B) {
	for _, st := range stores {
		for _, shape := range []string{"chain", "wide"} {
			b.Run(st.name+"/"+shape, func(b *testing.B) {
				e := setupOn(b, st.open(b))
				loadTrace(b, e, "ent/usage", shape)
				body := fmt.Sprintf(`{"project_id":"ent/usage","filter":{"trace_ids":[%q]}}`, shape)
				var res struct {
					CallUsage map[string]map[string]struct {
						PromptTokens int `json:"prompt_tokens"`
					} `json:"call_usage"`
				}
				if err := json.Unmarshal(e.mustPost(b, "/trace/usage", body), &res); err != nil || len(res.CallUsage) != 10000 {
					b.Fatalf("usage: %d entries, %v", len(res.CallUsage), err)
				}
				b.ResetTimer()
				start, cpu0 := time.Now(), cputime.Seconds()
				for i := 0; i < b.N; i++ {
					e.mustPost(b, "/trace/usage", body)
				}
				b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/rollup")
				// CPU time of the process (server and client, all threads): on a machine shared
				// with other work it moves less than the wall-clock time does.
				b.ReportMetric((cputime.Seconds()-cpu0)*1000/float64(b.N), "cpu-ms/rollup")
			})
		}
	}
}

func BenchmarkTableQuery100k(b *testing.B) {
	e := setup(b)
	var rows strings.Builder
	rows.WriteString(`{"table":{"project_id":"ent/tbl","rows":[`)
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 100000; i++ {
		if i > 0 {
			rows.WriteByte(',')
		}
		fmt.Fprintf(&rows, `{"input":{"question":"q%d","score":%d},"expected":"a%d"}`, i, rng.Intn(1000000), i)
	}
	rows.WriteString(`]}}`)
	var created struct {
		Digest string `json:"digest"`
	}
	// The 100k-row table is larger than the default body limit of the test server: send it in
	// appended chunks through /table/update is slower, so raise nothing and split the rows.
	body := rows.String()
	if len(body) > 1<<20 {
		created.Digest = createBigTable(b, e, body)
	} else if err := json.Unmarshal(e.mustPost(b, "/table/create", body), &created); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name, sort string
		cold       bool
	}{
		{"unsorted", "", false},
		{"sorted_dotted", `,"sort_by":[{"field":"input.score","order":"desc"}]`, false},
		{"sorted_dotted_cold", `,"sort_by":[{"field":"input.score","order":"desc"}]`, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			e.mustPost(b, "/table/query", fmt.Sprintf(`{"project_id":"ent/tbl","digest":%q,"limit":100,"offset":0%s}`, created.Digest, c.sort))
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if c.cold {
					e.svc.ResetSortCache()
				}
				off := rng.Intn(99900)
				e.mustPost(b, "/table/query", fmt.Sprintf(`{"project_id":"ent/tbl","digest":%q,"limit":100,"offset":%d%s}`, created.Digest, off, c.sort))
			}
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}

// createBigTable creates a table whose JSON is over the test server's body limit by creating
// it directly through the service-level route in chunks: rows are appended with /table/update.
func createBigTable(b *testing.B, e *env, body string) string {
	var req struct {
		Table struct {
			Rows []json.RawMessage `json:"rows"`
		} `json:"table"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		b.Fatal(err)
	}
	rows := req.Table.Rows
	first, _ := json.Marshal(map[string]any{"table": map[string]any{"project_id": "ent/tbl", "rows": rows[:5000]}})
	var res struct {
		Digest string `json:"digest"`
	}
	_ = json.Unmarshal(e.mustPost(b, "/table/create", string(first)), &res)
	for i := 5000; i < len(rows); i += 5000 {
		var ups []map[string]any
		for _, r := range rows[i:min(i+5000, len(rows))] {
			ups = append(ups, map[string]any{"append": map[string]any{"row": r}})
		}
		body, _ := json.Marshal(map[string]any{"project_id": "ent/tbl", "base_digest": res.Digest, "updates": ups})
		_ = json.Unmarshal(e.mustPost(b, "/table/update", string(body)), &res)
	}
	return res.Digest
}

func BenchmarkObjsQueryLatest(b *testing.B) {
	e := setup(b)
	ctx := context.Background()
	for v := 0; v < 10; v++ {
		for o := 0; o < 10000; o++ {
			val := fmt.Sprintf(`{"_type":"Model","_class_name":"M","_bases":["Model","Object","BaseModel"],"version":%d,"params":{"lr":0.001,"layers":%d}}`, v, o%12)
			if _, err := e.svc.ObjCreate(ctx, trace.ObjCreateReq{Obj: trace.ObjSchemaForInsert{ProjectID: "ent/objs", ObjectID: fmt.Sprintf("obj%d", o), Val: json.RawMessage(val)}}, "ent"); err != nil {
				b.Fatal(err)
			}
		}
	}
	body := `{"project_id":"ent/objs","filter":{"latest_only":true}}`
	var res struct {
		Objs []json.RawMessage `json:"objs"`
	}
	if err := json.Unmarshal(e.mustPost(b, "/objs/query", body), &res); err != nil || len(res.Objs) != 10000 {
		b.Fatalf("objs: %d %v", len(res.Objs), err)
	}
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		e.mustPost(b, "/objs/query", body)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/query")
}
