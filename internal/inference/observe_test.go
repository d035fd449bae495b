package inference

import (
	"context"
	"sync"
	"testing"
	"time"
)

type recorder struct {
	mu                  sync.Mutex
	first, inter, fin   int
	steps, stepTokens   int
	prefills            int
	requests            []RequestTimes
	ctxs                []context.Context
	promptSum, genSum   int
	lastStart, lastTime time.Time
}

func (r *recorder) FirstToken(time.Duration) { r.mu.Lock(); r.first++; r.mu.Unlock() }
func (r *recorder) InterToken(time.Duration) { r.mu.Lock(); r.inter++; r.mu.Unlock() }
func (r *recorder) Finished(_ time.Duration, p, g int) {
	r.mu.Lock()
	r.fin++
	r.promptSum += p
	r.genSum += g
	r.mu.Unlock()
}
func (r *recorder) Step(start time.Time, d time.Duration, seqs, tokens, prefills int) {
	r.mu.Lock()
	r.steps++
	r.stepTokens += tokens
	r.prefills += prefills
	r.mu.Unlock()
}
func (r *recorder) Request(ctx context.Context, t RequestTimes) {
	r.mu.Lock()
	r.requests = append(r.requests, t)
	r.ctxs = append(r.ctxs, ctx)
	r.mu.Unlock()
}

// plain is an Observer with no step or request hooks.
type plain struct{ fin int }

func (p *plain) FirstToken(time.Duration)         {}
func (p *plain) InterToken(time.Duration)         {}
func (p *plain) Finished(time.Duration, int, int) { p.fin++ }

type ctxKey struct{}

// TestObserver: the engine tells an observer each request's first token, the tokens after
// it, its end (prompt and generated tokens), each step, and the request's times in its own
// context; Tee tells several.
func TestObserver(t *testing.T) {
	rec, pl := &recorder{}, &plain{}
	if Tee(nil) != nil || Tee(pl) != Observer(pl) {
		t.Fatal("Tee of one is that one")
	}
	e := New(tiny(t), Options{MaxBatchTokens: 7, BlockSize: 4, Observer: Tee(rec, nil, pl)})
	defer e.Close()
	ctx := context.WithValue(context.Background(), ctxKey{}, "req")
	prompts := [][]int{{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, {20, 21}}
	var hs []*Handle
	for _, p := range prompts {
		h, err := e.Submit(ctx, &Request{Prompt: p, Params: greedy(), MaxTokens: 5, IgnoreEOS: true, N: 1})
		if err != nil {
			t.Fatal(err)
		}
		hs = append(hs, h)
	}
	for _, h := range hs {
		collect(t, h)
	}
	// The retiring loop reports after the last event; wait for it.
	deadline := time.Now().Add(5 * time.Second)
	for {
		rec.mu.Lock()
		n := len(rec.requests)
		rec.mu.Unlock()
		if n == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.first != 2 || rec.inter != 8 || rec.fin != 2 || pl.fin != 2 {
		t.Fatalf("first %d inter %d finished %d/%d", rec.first, rec.inter, rec.fin, pl.fin)
	}
	if rec.promptSum != 13 || rec.genSum != 10 {
		t.Fatalf("prompt %d generated %d", rec.promptSum, rec.genSum)
	}
	if rec.steps == 0 || rec.stepTokens < 13+8 || rec.prefills == 0 {
		t.Fatalf("steps %d tokens %d prefills %d", rec.steps, rec.stepTokens, rec.prefills)
	}
	for i, rt := range rec.requests {
		if rt.FirstToken.Before(rt.Queued) || rt.Finished.Before(rt.FirstToken) || rt.GeneratedTokens != 5 || rec.ctxs[i].Value(ctxKey{}) != "req" {
			t.Fatalf("request %+v", rt)
		}
	}
}
