package respstore

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// TestStore: a response is read back by its entity only, replaced by a Put of the same id,
// and deleted; on SQLite and PostgreSQL.
func TestStore(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		s, err := Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		r := Record{ID: "resp_1", Entity: "e", Model: "demo", Conversation: json.RawMessage(`[{"role":"user","content":"hi"}]`),
			InputItems: json.RawMessage(`[]`), Response: json.RawMessage(`{"id":"resp_1"}`)}
		if err := s.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "e", "resp_1")
		if err != nil || string(got.Conversation) != string(r.Conversation) || got.Model != "demo" || got.CreatedAt.IsZero() {
			t.Fatalf("get: %+v %v", got, err)
		}
		if _, err := s.Get(ctx, "other", "resp_1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another entity read it: %v", err)
		}
		r.Response = json.RawMessage(`{"id":"resp_1","v":2}`)
		if err := s.Put(ctx, r); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Get(ctx, "e", "resp_1"); string(got.Response) != `{"id":"resp_1","v":2}` {
			t.Fatalf("replaced: %s", got.Response)
		}
		if err := s.Delete(ctx, "other", "resp_1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("another entity deleted it: %v", err)
		}
		if err := s.Delete(ctx, "e", "resp_1"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "e", "resp_1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("after delete: %v", err)
		}
		// Expiry: only those stored before the time go.
		now := time.Now()
		old, young := r, r
		old.ID, old.CreatedAt = "resp_old", now.Add(-48*time.Hour)
		young.ID, young.CreatedAt = "resp_young", now
		for _, x := range []Record{old, young} {
			if err := s.Put(ctx, x); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := s.DeleteOlder(ctx, now.Add(-24*time.Hour)); err != nil || n != 1 {
			t.Fatalf("expired %d, %v", n, err)
		}
		if _, err := s.Get(ctx, "e", "resp_young"); err != nil {
			t.Fatalf("the young one: %v", err)
		}
	})
}
