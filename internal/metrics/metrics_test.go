package metrics

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/trace"
)

func TestJobsWrap(t *testing.T) {
	r := New()
	run := r.Jobs.Wrap(func(ctx context.Context, j jobs.Job, progress func(string, any)) (*int, error) {
		progress(jobs.EventStep, map[string]any{"step": 1, "num_tokens": 100, "tokens_per_second": 50.5})
		progress(jobs.EventStep, struct {
			NumTrainableTokens int     `json:"num_trainable_tokens"`
			TokensPerSecond    float64 `json:"tokens_per_second"`
		}{20, 10})
		progress("other", nil)
		if j.Attempt > 1 {
			return nil, errors.New("boom")
		}
		return nil, nil
	})
	var events []string
	progress := func(typ string, _ any) { events = append(events, typ) }
	if _, err := run(context.Background(), jobs.Job{Kind: "sft", Attempt: 1}, progress); err != nil {
		t.Fatal(err)
	}
	if _, err := run(context.Background(), jobs.Job{Kind: "sft", Attempt: 2}, progress); err == nil {
		t.Fatal("the runner's error is passed on")
	}
	if len(events) != 6 {
		t.Fatalf("events passed on: %v", events)
	}
	for name, want := range map[float64]float64{
		testutil.ToFloat64(r.Jobs.tokens.WithLabelValues("sft")):    240,
		testutil.ToFloat64(r.Jobs.tokensSec.WithLabelValues("sft")): 10,
		testutil.ToFloat64(r.Jobs.runs.WithLabelValues("sft")):      2,
		testutil.ToFloat64(r.Jobs.retries.WithLabelValues("sft")):   1,
		testutil.ToFloat64(r.Jobs.steps.WithLabelValues("sft")):     4,
	} {
		if name != want {
			t.Errorf("got %v, want %v", name, want)
		}
	}
	if n := testutil.CollectAndCount(r.Jobs.duration); n != 8 { // sft and rl, four outcomes each
		t.Fatalf("%d duration series", n)
	}
}

func TestQueueAndStore(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		r := New()
		q, err := jobs.Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		r.Jobs.SetQueue(q)
		r.Store.SetDB(d)
		if _, err := q.Enqueue(ctx, "m1", "ent", "sft", map[string]any{}); err != nil {
			t.Fatal(err)
		}
		if _, err := q.Enqueue(ctx, "m1", "ent", "custom", map[string]any{}); err != nil {
			t.Fatal(err)
		}
		got, err := testutil.GatherAndCount(r.Gatherer(), "hone:jobs")
		if err != nil || got != 5 { // sft/rl × QUEUED/RUNNING, and custom QUEUED
			t.Fatalf("hone:jobs series: %d %v", got, err)
		}
		want := `
# HELP hone:jobs Training jobs waiting (QUEUED) and running (RUNNING) in the store, by kind (every node of a shared store sees the same).
# TYPE hone:jobs gauge
hone:jobs{kind="custom",status="QUEUED"} 1
hone:jobs{kind="rl",status="QUEUED"} 0
hone:jobs{kind="rl",status="RUNNING"} 0
hone:jobs{kind="sft",status="QUEUED"} 1
hone:jobs{kind="sft",status="RUNNING"} 0
`
		if err := testutil.GatherAndCompare(r.Gatherer(), strings.NewReader(want), "hone:jobs"); err != nil {
			t.Fatal(err)
		}
		if n, err := testutil.GatherAndCount(r.Gatherer(), "go_sql_open_connections", "hone:store_errors_total"); err != nil || n < 3 {
			t.Fatalf("store series %d %v", n, err)
		}
		// Calls written through a wrapped store are counted, by the writes that landed.
		st := trace.NewSQLStore(d)
		if err := st.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		svc := trace.NewService(r.Trace.Store(st))
		if _, err := svc.RecordCalls(ctx, []trace.RecordedCall{{Project: "ent/p", OpName: "a", Started: time.Now(), Ended: time.Now()},
			{Project: "ent/p", OpName: "b", Started: time.Now(), Ended: time.Now()}}); err != nil {
			t.Fatal(err)
		}
		if n := testutil.ToFloat64(r.Trace.calls); n != 2 {
			t.Fatalf("calls ingested %v", n)
		}
	})
}

func TestHTTPMiddleware(t *testing.T) {
	r := New()
	mux := http.NewServeMux()
	mux.HandleFunc("POST /calls/stream_query", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("{}")) })
	mux.HandleFunc("POST /call/upsert_batch", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(400) })
	h := r.HTTP.Middleware(mux)
	for _, p := range []string{"/calls/stream_query", "/call/upsert_batch", "/nowhere"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", p, nil))
	}
	if n := testutil.CollectAndCount(r.HTTP.duration); n != 3 {
		t.Fatalf("%d series", n)
	}
	if n := testutil.CollectAndCount(r.Trace.query); n != 1 {
		t.Fatalf("query routes: %d", n)
	}
	if n := testutil.CollectAndCount(r.Trace.ingest); n != 0 { // a 400 is not an ingest's latency
		t.Fatalf("ingest routes: %d", n)
	}
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{`hone:http_request_duration_seconds_count{code="400",method="POST",route="/call/upsert_batch"} 1`,
		`route="unmatched"`, "go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %s in\n%.2000s", want, body)
		}
	}
}

// TestStoreKeepsInterfaces: the counting wrapper of a trace store passes on every exported
// method of the SQL store (the optional interfaces the trace service asks for: HasFile for the
// entity quota, table sorting), so that wrapping it changes nothing but the count.
func TestStoreKeepsInterfaces(t *testing.T) {
	r := New()
	st := trace.NewSQLStore(dbtest.SQLite(t))
	wrapped := reflect.TypeOf(r.Trace.Store(st))
	sqlType := reflect.TypeOf(st)
	for i := range sqlType.NumMethod() {
		m := sqlType.Method(i)
		if m.Name == "Migrate" || m.Name == "DB" {
			continue // the system migrates the store before wrapping it; nothing asks a store for its DB
		}
		if _, ok := wrapped.MethodByName(m.Name); !ok {
			t.Errorf("the wrapped trace store lacks %s: pass it on in Trace.Store", m.Name)
		}
	}
	// And a store without the optional interfaces stays without them.
	if _, ok := r.Trace.Store(struct{ trace.Store }{st}).(trace.TableSorter); ok {
		t.Error("a store that sorts no tables does not become one")
	}
}
