package tokenizer

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"
)

// TestVocabIndex: the compact index answers as the map it was built from, for every key and
// for texts it lacks (prefixes, extensions, the empty string), including keys whose text is
// not their id's token text and ids that several texts share.
func TestVocabIndex(t *testing.T) {
	tokens := []string{"", "a", "ab", "abc", "b", "▁the", "<0x0A>", "dup", "dup"}
	m := map[string]int32{}
	for id, s := range tokens {
		if s != "" {
			m[s] = int32(id) // "dup" maps to 8, the later one
		}
	}
	m["<added>"] = 2 // an added token over id 2, whose token text is "ab"
	for i := range 3000 {
		s := fmt.Sprintf("tok%d", i)
		tokens = append(tokens, s)
		m[s] = int32(len(tokens) - 1)
	}
	v := newVocabIndex(m, tokens)
	if len(v.slots) < 2*len(m) {
		t.Fatalf("%d slots for %d entries", len(v.slots), len(m))
	}
	for s, want := range m {
		if got, ok := v.get(s); !ok || got != want {
			t.Fatalf("%q: %d %v, want %d", s, got, ok, want)
		}
		if got, ok := v.getBytes([]byte(s)); !ok || got != want {
			t.Fatalf("%q as bytes: %d %v, want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "abcd", "c", "▁", "tok3000", "tok", "du", "<added"} {
		if id, ok := v.get(s); ok {
			t.Fatalf("%q: found %d", s, id)
		}
	}
	if a := testing.AllocsPerRun(100, func() { v.getBytes([]byte("tok17")) }); a != 0 {
		t.Fatalf("getBytes allocates %v times", a)
	}
	p := newPieceTable([][]byte{nil, []byte("x"), {}, []byte("hello")})
	if p.len() != 4 || string(p.at(1)) != "x" || len(p.at(2)) != 0 || string(p.at(3)) != "hello" || cap(p.at(1)) != 1 {
		t.Fatal("piece table")
	}
	ss := compactStrings([]string{"a", "", "bcd"})
	if !slices.Equal(ss, []string{"a", "", "bcd"}) {
		t.Fatal(ss)
	}
}

// TestGemma3TokenizerHeap: Gemma 3's tokenizer (262,144 tokens) holds at most 20 MB of heap
// once loaded (about 14: its text → id index, token texts, pieces, added-token matcher and
// merge ranks); as Go maps and one string per token it held 50 MB, which the collector's
// headroom doubled in the server's resident memory. With HONE_GEMMA3_GGUF only.
func TestGemma3TokenizerHeap(t *testing.T) {
	path := os.Getenv("HONE_GEMMA3_GGUF")
	if path == "" {
		t.Skip("HONE_GEMMA3_GGUF is not set (scripts/test-setup.sh)")
	}
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	tk, err := LoadGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	held := heap() - before
	t.Logf("the tokenizer holds %.1f MB", float64(held)/1e6)
	if held > 20<<20 {
		t.Errorf("the tokenizer holds %d bytes", held)
	}
	if tk.VocabSize() != 262144 {
		t.Fatalf("%d tokens", tk.VocabSize())
	}
	runtime.KeepAlive(tk)
}
