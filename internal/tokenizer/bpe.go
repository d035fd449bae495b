package tokenizer

import "container/heap"

// maxCachedWord bounds the pre-tokens whose encodings are cached.
const maxCachedWord = 64

// encodeWord appends the BPE encoding of one pre-token.
func (t *Tokenizer) encodeWord(w string, out []int) []int {
	if w == "" {
		return out
	}
	if len(w) <= maxCachedWord {
		if ids, ok := t.cache.get(w); ok {
			for _, id := range ids {
				out = append(out, int(id))
			}
			return out
		}
	}
	var ids []int32
	if t.charLevel {
		ids = t.bpeChars(w)
	} else {
		ids = t.bpe([]byte(w))
	}
	if len(w) <= maxCachedWord {
		t.cache.put(w, ids)
	}
	for _, id := range ids {
		out = append(out, int(id))
	}
	return out
}

type symbol struct {
	id         int32
	prev, next int32
	alive      bool
	unk        bool // stands for a byte missing from the vocabulary
}

type mergeCand struct {
	rank   int32
	pos    int32
	result int32
}

type candHeap []mergeCand

func (h candHeap) Len() int { return len(h) }
func (h candHeap) Less(i, j int) bool {
	if h[i].rank != h[j].rank {
		return h[i].rank < h[j].rank
	}
	return h[i].pos < h[j].pos
}
func (h candHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *candHeap) Push(x any)   { *h = append(*h, x.(mergeCand)) }
func (h *candHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// bpe merges the bytes of a pre-token (byte-level BPE): the pair of adjacent symbols with the lowest merge
// rank is merged first, the leftmost on ties, as Hugging Face tokenizers does.
func (t *Tokenizer) bpe(b []byte) []int32 {
	if t.ignoreMerges {
		if id, ok := t.vocab.get(byteLevelString(b)); ok {
			return []int32{id}
		}
	}
	syms := make([]symbol, 0, len(b))
	for _, c := range b {
		id := t.byteToken[c]
		if id < 0 {
			// A byte the vocabulary cannot spell (not in a well-formed byte-level BPE): the
			// unknown token when there is one (one for a run with fuse_unk), else dropped.
			if t.unkID < 0 {
				continue
			}
			if n := len(syms); t.fuseUnk && n > 0 && syms[n-1].id == t.unkID && syms[n-1].unk {
				continue
			}
			syms = append(syms, symbol{id: t.unkID, prev: int32(len(syms)) - 1, next: int32(len(syms)) + 1, alive: true, unk: true})
			continue
		}
		syms = append(syms, symbol{id: id, prev: int32(len(syms)) - 1, next: int32(len(syms)) + 1, alive: true})
	}
	return t.mergeSymbols(syms)
}

// mergeSymbols applies the merges to a word's initial symbols (linked in order, prev and next
// set, the last one's next -1 set here) and returns the ids of what is left.
func (t *Tokenizer) mergeSymbols(syms []symbol) []int32 {
	if len(syms) == 0 {
		return nil
	}
	syms[len(syms)-1].next = -1
	if len(syms) == 1 {
		return []int32{syms[0].id}
	}
	h := make(candHeap, 0, len(syms))
	for i := 0; i+1 < len(syms); i++ {
		if m, ok := t.mergeOf(syms[i].id, syms[i+1].id); ok {
			h = append(h, mergeCand{rank: m.rank, pos: int32(i), result: m.result})
		}
	}
	heap.Init(&h)
	for h.Len() > 0 {
		c := heap.Pop(&h).(mergeCand)
		s := &syms[c.pos]
		if !s.alive || s.next < 0 {
			continue
		}
		r := &syms[s.next]
		// The candidate is stale if either side changed since it was pushed.
		if m, ok := t.mergeOf(s.id, r.id); !ok || m.rank != c.rank || m.result != c.result {
			continue
		}
		s.id = c.result
		r.alive = false
		s.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.pos
		}
		if s.prev >= 0 {
			if m, ok := t.mergeOf(syms[s.prev].id, s.id); ok {
				heap.Push(&h, mergeCand{rank: m.rank, pos: s.prev, result: m.result})
			}
		}
		if s.next >= 0 {
			if m, ok := t.mergeOf(s.id, syms[s.next].id); ok {
				heap.Push(&h, mergeCand{rank: m.rank, pos: c.pos, result: m.result})
			}
		}
	}
	out := make([]int32, 0, len(syms))
	for i := int32(0); i >= 0; i = syms[i].next {
		out = append(out, syms[i].id)
	}
	return out
}
