package inference

import (
	"context"
	"errors"
	"math"
	"math/big"
	"testing"
	"time"

	"github.com/honeai/hone/internal/sample"
)

// refBlocksNeeded is blocksNeeded in arbitrary precision: the need as the arithmetic of
// admission means it, and whether it fits.
func refBlocksNeeded(promptLen, n, maxTokens int, beam bool, bs, blocks, windowBlocks, window int) (main, win *big.Int, ok bool) {
	if promptLen < 0 || n < 1 || maxTokens < 0 || bs < 1 || blocks < 0 {
		return nil, nil, false
	}
	B := big.NewInt(int64(bs))
	ceil := func(x *big.Int) *big.Int {
		q := new(big.Int).Add(x, new(big.Int).Sub(B, big.NewInt(1)))
		return q.Quo(q, B)
	}
	p, m := big.NewInt(int64(promptLen)), big.NewInt(int64(maxTokens))
	total := ceil(new(big.Int).Add(p, m))
	seqs := big.NewInt(1)
	if n == 1 && !beam {
		main = total
	} else {
		nn := big.NewInt(int64(n))
		if beam {
			nn.Mul(nn, big.NewInt(2))
		}
		per := new(big.Int).Add(ceil(m), big.NewInt(1))
		main = new(big.Int).Add(ceil(p), new(big.Int).Mul(nn, per))
		seqs = new(big.Int).Add(nn, big.NewInt(1))
	}
	ok = main.Cmp(big.NewInt(int64(blocks))) <= 0
	win = new(big.Int)
	if windowBlocks > 0 {
		each := new(big.Int).Add(total, big.NewInt(1))
		if each.Cmp(big.NewInt(int64(windowBlocks))) > 0 {
			each = big.NewInt(int64(windowBlocks))
		}
		win.Mul(seqs, each)
		if window >= 0 && win.Cmp(big.NewInt(int64(window))) > 0 {
			ok = false
		}
	}
	return main, win, ok
}

// FuzzAdmission holds admission's arithmetic to the arbitrary-precision reference for any
// prompt length, n, max_tokens, block size and cache sizes: no panic, no wrapped value, and
// a request is accepted exactly when its need fits (with the need the reference computes).
func FuzzAdmission(f *testing.F) {
	f.Add(int64(2), int64(math.MaxInt64), int64(1), false, int64(16), int64(4096), int64(0), int64(-1)) // the completions request
	f.Add(int64(9), int64(1)<<62, int64(16), false, int64(16), int64(4096), int64(0), int64(-1))        // its chat request
	f.Add(int64(9), int64(3), int64(math.MaxInt64), true, int64(16), int64(4096), int64(8), int64(64))  // max_tokens at the limit, beams
	f.Add(int64(math.MaxInt64), int64(1), int64(math.MaxInt64), false, int64(1), int64(math.MaxInt64), int64(0), int64(-1))
	f.Add(int64(100), int64(4), int64(10), false, int64(4), int64(64), int64(3), int64(20))
	f.Add(int64(1), int64(1<<31), int64(1<<31), false, int64(1<<20), int64(1<<40), int64(1<<10), int64(1<<50))
	f.Add(int64(17), int64(2), int64(15), true, int64(16), int64(8), int64(0), int64(-1))
	f.Fuzz(func(t *testing.T, promptLen, n, maxTokens int64, beam bool, bs, blocks, windowBlocks, window int64) {
		if bs > 1<<20 || blocks > 1<<40 || windowBlocks > 1<<20 || window > 1<<40 {
			t.Skip() // beyond any cache the engine builds (its sizes come from memory)
		}
		need, ok := blocksNeeded(int(promptLen), int(n), int(maxTokens), beam, int(bs), int(blocks), int(windowBlocks), int(window))
		main, win, refOK := refBlocksNeeded(int(promptLen), int(n), int(maxTokens), beam, int(bs), int(blocks), int(windowBlocks), int(window))
		if ok != refOK {
			t.Fatalf("blocksNeeded(%d, %d, %d, %v, %d, %d, %d, %d) ok=%v, the reference says %v (main %v, window %v)",
				promptLen, n, maxTokens, beam, bs, blocks, windowBlocks, window, ok, refOK, main, win)
		}
		if !ok {
			return
		}
		if main.Cmp(big.NewInt(int64(need.main))) != 0 || win.Cmp(big.NewInt(int64(need.window))) != 0 {
			t.Fatalf("blocksNeeded(%d, %d, %d, %v, %d, %d, %d, %d) = %+v, the reference says main %v window %v",
				promptLen, n, maxTokens, beam, bs, blocks, windowBlocks, window, need, main, win)
		}
		// What Submit then allocates for the request's events stays within the cache's
		// positions (and so never wraps).
		if n > 0 && maxTokens+2 > 0 && n > (math.MaxInt64-1)/(maxTokens+2) {
			t.Fatalf("accepted n=%d max_tokens=%d whose event buffer overflows", n, maxTokens)
		}
	})
}

// TestSubmitHugeN is the request at the engine: n of 2^63-1 and 2^62, and
// max_tokens of 2^63-1, are refused as too large instead of panicking in makechan.
func TestSubmitHugeN(t *testing.T) {
	e := New(tiny(t), Options{KVBlocks: 64, BlockSize: 4})
	defer e.Close()
	for _, req := range []*Request{
		{Prompt: []int{1, 2}, Params: sample.Defaults(), N: math.MaxInt, MaxTokens: 1},
		{Prompt: []int{1, 2}, Params: sample.Defaults(), N: 1 << 62, MaxTokens: 16},
		{Prompt: []int{1, 2}, Params: sample.Defaults(), N: 2, MaxTokens: math.MaxInt},
		{Prompt: []int{1, 2}, Params: sample.Defaults(), N: 1, MaxTokens: math.MaxInt},
		{Prompt: []int{1, 2}, Params: sample.Defaults(), Beam: &Beam{Width: math.MaxInt}, MaxTokens: 1},
		{Prompt: []int{1, 2}, Params: sample.Defaults(), N: 1, MaxTokens: -1},
	} {
		if _, err := e.Submit(context.Background(), req); !errors.Is(err, ErrTooLarge) {
			t.Errorf("n=%d max_tokens=%d: %v, want ErrTooLarge", req.N, req.MaxTokens, err)
		}
	}
	h, err := e.Submit(context.Background(), &Request{Prompt: []int{1, 2}, Params: greedy(), MaxTokens: 2})
	if err != nil {
		t.Fatal(err)
	}
	collect(t, h)
}

// TestQueueShares: one key's waiting sequences (a request's n, each prompt of a SubmitAll)
// are at most its share, so that another key still gets in; a single request is let in
// whatever its n when its key has nothing waiting; several prompts that can never fit the
// share are ErrTooManySequences; a refused SubmitAll queues none of its requests; the
// waiting queue as a whole counts requests; the counts return to zero as requests leave.
func TestQueueShares(t *testing.T) {
	e := New(tiny(t), Options{MaxQueue: 6, MaxQueuePerKey: 4, MaxRunning: 1, KVBlocks: 256, BlockSize: 4})
	defer e.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req := func(key string, n int) *Request {
		return &Request{Key: key, Prompt: []int{1, 2, 3}, Params: sample.Defaults(), N: n, MaxTokens: 2}
	}
	var hs []*Handle
	submit := func(want error, reqs ...*Request) {
		t.Helper()
		got, err := e.SubmitAll(ctx, reqs)
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Fatalf("SubmitAll of %d requests of key %q: %v, want %v", len(reqs), reqs[0].Key, err, want)
		}
		hs = append(hs, got...)
	}
	// A long request runs, so that the others wait.
	long, err := e.Submit(ctx, &Request{Key: "b", Prompt: []int{1, 2}, Params: greedy(), MaxTokens: 900, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	hs = append(hs, long)
	<-long.Events()
	submit(nil, req("a", 1), req("a", 2))                 // a: 3 sequences waiting
	submit(ErrKeyQueueFull, req("a", 1), req("a", 1))     // 5 > 4
	submit(ErrTooManySequences, req("a", 3), req("a", 2)) // never fits
	submit(nil, req("a", 1))                              // the refused ones queued nothing: 4
	submit(ErrKeyQueueFull, req("a", 1))
	submit(nil, req("b", 9))                                                         // another key gets in, whatever its n when it has nothing waiting
	submit(ErrKeyQueueFull, req("b", 1))                                             // then b's share is taken
	submit(nil, req("c", 1), req("c", 1))                                            // 6 requests waiting
	submit(ErrQueueFull, req("d", 1))                                                // the queue of 6 is full
	submit(ErrQueueFull, &Request{Prompt: []int{1}, Params: greedy(), MaxTokens: 1}) // no key: no share, but the queue is full
	cancel()
	for _, h := range hs {
		for range h.Events() {
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		e.mu.Lock()
		q, keys := e.queued, len(e.perKey)
		e.mu.Unlock()
		if q == 0 && keys == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the requests left: %d queued, %d keys counted", q, keys)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
