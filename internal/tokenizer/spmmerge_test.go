package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"unicode/utf8"
)

// pairMerges is what mergesFromScores listed before it looked merges up by concatenation:
// every split of a token, at a character boundary, into two tokens, keyed by their ids, with
// the token's rank.
func pairMerges(t *Tokenizer) map[uint64]merge {
	m := map[uint64]merge{}
	for id, s := range t.tokens {
		if id >= len(t.spmRank) || !vocabIs(t, s, int32(id)) {
			continue
		}
		for k := 1; k < len(s); k++ {
			if !utf8.RuneStart(s[k]) {
				continue
			}
			l, okL := t.vocab.get(s[:k])
			r, okR := t.vocab.get(s[k:])
			if okL && okR {
				m[pairKey(l, r)] = merge{rank: t.spmRank[id], result: int32(id)}
			}
		}
	}
	return m
}

// TestSPMMergesLookedUp: a SentencePiece vocabulary read with its scores (GGUF) merges two
// symbols when their concatenation is a token (mergeOf), which is exactly the list of pairs
// mergesFromScores made before: each listed pair merges to its token and rank, and the test
// corpus encodes to the same ids either way. With HONE_GEMMA3_GGUF (scripts/test-setup.sh),
// also on Gemma 3's 262,144 tokens, whose pair list held 18 MB for the server's life.
func TestSPMMergesLookedUp(t *testing.T) {
	var corpus []string
	data, err := os.ReadFile(filepath.Join(testdataDir(), "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &corpus); err != nil {
		t.Fatal(err)
	}
	load := map[string]func() *Tokenizer{"spm.gguf": func() *Tokenizer { return spmGGUF(t) }}
	if path := os.Getenv("HONE_GEMMA3_GGUF"); path != "" {
		load["gemma3"] = func() *Tokenizer {
			g, err := LoadGGUF(path)
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
	}
	for name, load := range load {
		t.Run(name, func(t *testing.T) {
			tk := load()
			if tk.spmRank == nil || tk.merges != nil {
				t.Fatal("the SentencePiece vocabulary keeps a list of pairs")
			}
			pairs := pairMerges(tk)
			if len(pairs) == 0 {
				t.Fatal("no merges")
			}
			for k, want := range pairs {
				if got, ok := tk.mergeOf(int32(k>>32), int32(uint32(k))); !ok || got != want {
					t.Fatalf("pair %d %d: %v %v, want %v", k>>32, uint32(k), got, ok, want)
				}
			}
			listed := load()
			listed.spmRank, listed.merges = nil, pairs
			for _, s := range corpus {
				if got, want := tk.Encode(s, false), listed.Encode(s, false); !slices.Equal(got, want) {
					t.Fatalf("%q: %v, with the pair list %v", s, got, want)
				}
			}
			t.Logf("%d pairs", len(pairs))
		})
	}
}

func vocabIs(t *Tokenizer, s string, id int32) bool {
	got, ok := t.vocab.get(s)
	return ok && got == id
}
