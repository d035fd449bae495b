package inference

import (
	"context"
	"errors"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
)

// TestKVBudgetBoundsBlocks: the KV cache is sized from a memory budget (the default one when
// none is given), holds no memory until requests run, grows with them up to the budget, and
// admission stays right when the budget is the limit: a single sequence may use every block,
// a request that can never fit is refused at Submit, and requests that fit only one at a time
// wait for each other and all finish.
func TestKVBudgetBoundsBlocks(t *testing.T) {
	m := tiny(t)
	const bs = 4
	per := model.KVBytesPerBlock(&m.Config, bs, kvcache.F32)

	def := New(m, Options{BlockSize: bs})
	if kv := def.KVCache(); int64(kv.Blocks) != DefaultKVCacheBytes/per || kv.HeldBytes != 0 {
		t.Fatalf("default budget: %+v", kv)
	}
	def.Close()

	e := New(m, Options{BlockSize: bs, KVCacheBytes: 10*per + per/2}) // 10.5 blocks: 10
	defer e.Close()
	kv := e.KVCache()
	if kv.Blocks != 10 || kv.Tokens() != 40 || kv.MaxBytes != 10*per || kv.HeldBytes != 0 || kv.BytesPerBlock != per {
		t.Fatalf("budget of 10.5 blocks: %+v", kv)
	}
	if got := e.MaxSequenceLen(); got != min(40, m.Config.MaxPositionEmbeddings) {
		t.Fatalf("max sequence %d", got)
	}
	// One sequence may fill the whole cache (prompt 30 + 10 output = 40 positions)...
	prompt := make([]int, 30)
	for i := range prompt {
		prompt[i] = 1 + i%7
	}
	h, err := e.Submit(context.Background(), &Request{Prompt: prompt, Params: greedy(), MaxTokens: 10, IgnoreEOS: true})
	if err != nil {
		t.Fatalf("a request of exactly the cache: %v", err)
	}
	if out := collect(t, h); len(out[0]) != 10 {
		t.Fatalf("got %d tokens", len(out[0]))
	}
	if held := e.KVCache().HeldBytes; held <= 0 || held > kv.MaxBytes {
		t.Fatalf("holds %d bytes after a 40-position request (budget %d)", held, kv.MaxBytes)
	}
	// ... one position more never fits, nor do two choices of 40.
	if _, err := e.Submit(context.Background(), &Request{Prompt: prompt, Params: greedy(), MaxTokens: 11}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("41 positions in a 40-position cache: %v", err)
	}
	if _, err := e.Submit(context.Background(), &Request{Prompt: prompt, Params: sample.Defaults(), MaxTokens: 10, N: 2}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("two choices of 40 positions: %v", err)
	}
	// Three requests of 24 positions each (6 blocks): one runs at a time, all finish.
	var hs []*Handle
	for i := range 3 {
		h, err := e.Submit(context.Background(), &Request{Prompt: prompt[:20], Params: greedy(), MaxTokens: 4, IgnoreEOS: true})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		hs = append(hs, h)
	}
	for i, h := range hs {
		if out := collect(t, h); len(out[0]) != 4 {
			t.Errorf("request %d: %d tokens", i, len(out[0]))
		}
	}
	if held := e.KVCache().HeldBytes; held > kv.MaxBytes {
		t.Fatalf("holds %d bytes, budget %d", held, kv.MaxBytes)
	}
}
