package trace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// bigBatch is a body of n calls in project: the start and end of each call side by side,
// except the ends of the first three calls (at the very end, several parts later) and call
// n-2 (its end before its start); a late item and the body itself carry fields Hone does not
// know. edit replaces item i's text.
func bigBatch(project string, n int, edit map[int]string) string {
	var items, late []string
	for i := range n {
		parent := "null"
		if i > 0 {
			parent = fmt.Sprintf(`"c%d"`, i-1)
		}
		extra := ""
		if i == n-5 {
			extra = `,"new_start_field":{"x":1}`
		}
		st := fmt.Sprintf(`{"mode":"start","req":{"start":{"project_id":%q,"id":"c%d","trace_id":"t","parent_id":%s,"op_name":"op%d","started_at":"2026-01-01T00:00:%02d.%03dZ","attributes":{},"inputs":{"q":"question %d"}%s}}}`,
			project, i, parent, i%3, i/1000, i%1000, i, extra)
		en := fmt.Sprintf(`{"mode":"end","req":{"end":{"project_id":%q,"id":"c%d","ended_at":"2026-01-01T00:01:00Z","output":{"a":%d},"summary":{"usage":{"m":{"prompt_tokens":%d,"completion_tokens":1,"requests":1}}}}}}`,
			project, i, i, i%7)
		switch {
		case i < 3:
			items = append(items, st)
			late = append(late, en)
		case i == n-2:
			items = append(items, en, st)
		default:
			items = append(items, st, en)
		}
	}
	items = append(items, late...)
	for i, text := range edit {
		items[i] = text
	}
	return `{"batch":[` + strings.Join(items, ",") + `],"client":"test"}`
}

// checkOp stands in for the route's checks: an op name "bad" is refused.
func checkOp(i int, it *CallBatchItem) error {
	if it.Req.Start != nil && it.Req.Start.OpName == "bad" {
		return badField(fmt.Sprintf("batch[%d].req.start.op_name", i), "is bad")
	}
	return nil
}

// plainUpsert is the path before the pipeline: decode all, check all, then CallUpsertBatch.
func plainUpsert(ctx context.Context, s *Service, body string, authorize Authorizer) (CallCreateBatchRes, error) {
	req, unk, err := DecodeCallBatch([]byte(body))
	if err != nil {
		return CallCreateBatchRes{}, err
	}
	for i := range req.Batch {
		if err := checkOp(i, &req.Batch[i]); err != nil {
			return CallCreateBatchRes{}, err
		}
	}
	return s.CallUpsertBatch(WithUnknownFields(ctx, "/call/upsert_batch", unk), req, authorize)
}

// projectCalls returns the calls of project as JSON lines without the project, sorted by id.
func projectCalls(t *testing.T, s *Service, project string) []string {
	t.Helper()
	var out []string
	err := s.CallsQuery(context.Background(), CallsQueryReq{ProjectID: project, SortBy: []SortBy{{Field: "id", Direction: "asc"}}}, func(c CallSchema) error {
		c.ProjectID = ""
		b, err := json.Marshal(c)
		out = append(out, string(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// A batch written through the pipeline (decoded part by part while earlier parts are written)
// gives the answer, the calls and the kept unknown fields that the plain path gives.
func TestCallUpsertBatchBodyMatchesPlainPath(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s := newService(t, d)
		counted := &countingStore{Store: s.store}
		s.store = counted
		for _, n := range []int{10, 700} { // one part, and several
			piped, plain := fmt.Sprintf("ent/piped%d", n), fmt.Sprintf("ent/plain%d", n)
			counted.parts = 0
			got, err := s.CallUpsertBatchBody(ctx, "/call/upsert_batch", []byte(bigBatch(piped, n, nil)), checkOp, allow)
			if err != nil {
				t.Fatal(err)
			}
			wantParts := (2*n + ingestPart - 1) / ingestPart
			if 2*n <= ingestPart {
				wantParts = 0 // a small batch takes the plain path: no stream
			}
			if counted.parts != wantParts {
				t.Fatalf("n=%d: written in %d parts, want %d", n, counted.parts, wantParts)
			}
			want, err := plainUpsert(ctx, s, bigBatch(plain, n, nil), allow)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := fmt.Sprint(got.Res), fmt.Sprint(want.Res); g != w || len(got.Res) != 2*n {
				t.Fatalf("n=%d: answers differ:\n%.300s\n%.300s", n, g, w)
			}
			gc, wc := projectCalls(t, s, piped), projectCalls(t, s, plain)
			if len(gc) != n || strings.Join(gc, "\n") != strings.Join(wc, "\n") {
				t.Fatalf("n=%d: %d calls, want %d; first:\n%s\n%s", n, len(gc), len(wc), gc[0], wc[0])
			}
			for _, target := range []string{"", fmt.Sprintf("call:c%d", n-5)} {
				ge, err1 := s.ExtraFields(ctx, piped, target)
				we, err2 := s.ExtraFields(ctx, plain, target)
				if err1 != nil || err2 != nil || len(ge) != 1 || len(we) != 1 || string(ge[0].Fields) != string(we[0].Fields) {
					t.Fatalf("n=%d: unknown fields of %q: %+v / %+v (%v %v)", n, target, ge, we, err1, err2)
				}
			}
		}
	})
}

// countingStore counts the parts of call writes a stream hands the store.
type countingStore struct {
	Store
	parts int
}

func (c *countingStore) UpsertCallStream(ctx context.Context, next func() ([]CallWrite, error)) error {
	return c.Store.UpsertCallStream(ctx, func() ([]CallWrite, error) {
		ws, err := next()
		if len(ws) > 0 {
			c.parts++
		}
		return ws, err
	})
}

// failingStore fails a stream of call writes after its first parts, as a full disk would.
type failingStore struct {
	Store
	after int
}

var errDiskFull = errors.New("disk full")

func (f failingStore) UpsertCallStream(ctx context.Context, next func() ([]CallWrite, error)) error {
	parts := 0
	return f.Store.UpsertCallStream(ctx, func() ([]CallWrite, error) {
		if parts == f.after {
			return nil, errDiskFull
		}
		parts++
		return next()
	})
}

// A bad item late in a large batch gets the error the plain path gives (the first bad item,
// by the precedence of decoding, checks, the ordered pass, then the store), and nothing of the
// batch is written, though its first parts already were when the item was reached.
func TestCallUpsertBatchBodyErrors(t *testing.T) {
	const n = 700 // 1,400 items: six parts
	bad := func(i int, project, mode, op string) string {
		return fmt.Sprintf(`{"mode":%s,"req":{"start":{"project_id":%q,"id":"x%d","trace_id":"t","op_name":%q,"started_at":"2026-01-01T00:00:00Z"}}}`,
			mode, project, i, op)
	}
	const p = "ent/err"
	refuse := func(project, param string) error {
		if project != p {
			return apierror.Forbidden(param, "no")
		}
		return nil
	}
	for _, c := range []struct {
		name     string
		edit     map[int]string
		failAt   int // the store fails after this many parts (0: it does not)
		param    string
		internal bool
	}{
		{"decoding wins over an earlier check", map[int]string{5: bad(5, p, `"start"`, "bad"), 1100: bad(1100, p, `1`, "op")}, 0, "batch[1100].mode", false},
		{"a check wins over an earlier refusal", map[int]string{10: bad(10, "other/p", `"start"`, "op"), 900: bad(900, p, `"start"`, "bad")}, 0, "batch[900].req.start.op_name", false},
		{"refused late", map[int]string{1300: bad(1300, "other/p", `"start"`, "op")}, 0, "batch[1300].req.start.project_id", false},
		{"a bad mode late", map[int]string{1000: bad(1000, p, `"stop"`, "op")}, 0, "batch[1000].mode", false},
		{"the item wins over the store", map[int]string{1300: bad(1300, p, `"stop"`, "op")}, 2, "batch[1300].mode", false},
		{"the store", nil, 2, "", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
				ctx := context.Background()
				s := newService(t, d)
				if c.failAt > 0 {
					s.store = failingStore{Store: s.store, after: c.failAt}
				}
				body := bigBatch(p, n, c.edit)
				_, err := s.CallUpsertBatchBody(ctx, "/call/upsert_batch", []byte(body), checkOp, refuse)
				if c.internal {
					if !errors.Is(err, errDiskFull) {
						t.Fatalf("err = %v, want the store's", err)
					}
				} else if e, ok := apierror.As(err); !ok || e.Param != c.param {
					t.Fatalf("err = %v, want one naming %s", err, c.param)
				}
				if c.failAt == 0 {
					_, perr := plainUpsert(ctx, s, body, refuse)
					if fmt.Sprint(perr) != fmt.Sprint(err) {
						t.Fatalf("plain path: %v, pipeline: %v", perr, err)
					}
				}
				if calls := projectCalls(t, s, p); len(calls) != 0 {
					t.Fatalf("%d calls written", len(calls))
				}
				if ex, _ := s.ExtraFields(ctx, p, ""); len(ex) != 0 {
					t.Fatalf("unknown fields kept: %+v", ex)
				}
			})
		})
	}
}

// panickingStore panics in the middle of a stream of call writes.
type panickingStore struct{ Store }

func (p panickingStore) UpsertCallStream(ctx context.Context, next func() ([]CallWrite, error)) error {
	return p.Store.UpsertCallStream(ctx, func() ([]CallWrite, error) {
		if _, err := next(); err != nil {
			return nil, err
		}
		panic("store bug")
	})
}

// A panic of the writer goroutine is raised again on the request's goroutine (where the HTTP
// layer's recovery answers 500), not left to crash the process, and nothing is written.
func TestCallUpsertBatchBodyWriterPanic(t *testing.T) {
	d := dbtest.SQLite(t)
	s := newService(t, d)
	s.store = panickingStore{Store: s.store}
	func() {
		defer func() {
			if p := recover(); p != "store bug" {
				t.Fatalf("recovered %v, want the store's panic", p)
			}
		}()
		s.CallUpsertBatchBody(context.Background(), "/call/upsert_batch", []byte(bigBatch("ent/panic", 400, nil)), checkOp, allow)
		t.Fatal("no panic")
	}()
	if calls := projectCalls(t, s, "ent/panic"); len(calls) != 0 {
		t.Fatalf("%d calls written", len(calls))
	}
}
