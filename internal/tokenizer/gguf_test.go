package tokenizer

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/gguf"
)

// ggufFromTokenizerJSON writes the tokenizer.ggml.* metadata that llama.cpp's converter
// writes for a committed tokenizer.json, with the given pre-tokenizer name.
func ggufFromTokenizerJSON(t *testing.T, name, pre string) *gguf.Metadata {
	t.Helper()
	raw, err := readMaybeGz(filepath.Join(testdataDir(), name, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var tj struct {
		AddedTokens []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens"`
		Model struct {
			Vocab  map[string]int    `json:"vocab"`
			Merges []json.RawMessage `json:"merges"`
		} `json:"model"`
	}
	if err := json.Unmarshal(raw, &tj); err != nil {
		t.Fatal(err)
	}
	n := len(tj.Model.Vocab)
	for _, a := range tj.AddedTokens {
		n = max(n, a.ID+1)
	}
	tokens, types := make([]string, n), make([]int32, n)
	for s, id := range tj.Model.Vocab {
		tokens[id], types[id] = s, 1
	}
	for _, a := range tj.AddedTokens {
		tokens[a.ID], types[a.ID] = a.Content, 4
		if a.Special {
			types[a.ID] = 3
		}
	}
	merges := make([]string, len(tj.Model.Merges))
	for i, m := range tj.Model.Merges {
		var s string
		var pair []string
		if json.Unmarshal(m, &s) != nil {
			if err := json.Unmarshal(m, &pair); err != nil {
				t.Fatal(err)
			}
			s = pair[0] + " " + pair[1]
		}
		merges[i] = s
	}
	var buf bytes.Buffer
	meta := []gguf.KV{{Key: "tokenizer.ggml.model", Value: "gpt2"}, {Key: "tokenizer.ggml.pre", Value: pre},
		{Key: "tokenizer.ggml.tokens", Value: tokens}, {Key: "tokenizer.ggml.token_type", Value: types},
		{Key: "tokenizer.ggml.merges", Value: merges}}
	if err := gguf.Write(&buf, meta, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes(), name+".gguf")
	if err != nil {
		t.Fatal(err)
	}
	return f.Metadata
}

// The Llama 3 and Qwen3 vocabularies, as GGUF metadata with llama.cpp's pre-tokenizer names,
// give the ids of their tokenizer.json on the whole test corpus.
func TestFromGGUFMatchesTokenizerJSON(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testdataDir(), "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var corpus []string
	if err := json.Unmarshal(data, &corpus); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ dir, pre string }{{"llama3", "llama-bpe"}, {"qwen3", "qwen2"}, {"smollm2", "smollm"}} {
		t.Run(c.dir, func(t *testing.T) {
			want, err := Load(filepath.Join(testdataDir(), c.dir))
			if err != nil {
				t.Fatal(err)
			}
			got, err := FromGGUF(ggufFromTokenizerJSON(t, c.dir, c.pre))
			if err != nil {
				t.Fatal(err)
			}
			if got.VocabSize() != want.VocabSize() || !slices.Equal(got.SpecialIDs(), want.SpecialIDs()) {
				t.Fatalf("vocabulary %d, special %d; want %d, %d", got.VocabSize(), len(got.SpecialIDs()), want.VocabSize(), len(want.SpecialIDs()))
			}
			for _, s := range corpus {
				if g, w := got.Encode(s, false), want.Encode(s, false); !slices.Equal(g, w) {
					t.Fatalf("%q: ids %v, want %v", s, g, w)
				}
			}
		})
	}
}

// add_bos_token and add_eos_token put BOS and EOS around an encoded text.
func TestFromGGUFAddsBOS(t *testing.T) {
	md := ggufFromTokenizerJSON(t, "smollm2", "smollm")
	var buf bytes.Buffer
	var meta []gguf.KV
	for _, k := range md.Keys() {
		v, _ := md.Get(k)
		meta = append(meta, gguf.KV{Key: k, Value: v})
	}
	meta = append(meta, gguf.KV{Key: "tokenizer.ggml.bos_token_id", Value: uint32(1)},
		gguf.KV{Key: "tokenizer.ggml.eos_token_id", Value: uint32(2)},
		gguf.KV{Key: "tokenizer.ggml.add_bos_token", Value: true}, gguf.KV{Key: "tokenizer.ggml.add_eos_token", Value: true})
	if err := gguf.Write(&buf, meta, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes(), "x.gguf")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := FromGGUF(f.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode("hi", true)
	if len(ids) < 3 || ids[0] != 1 || ids[len(ids)-1] != 2 || !strings.Contains(tok.Decode(ids[1:len(ids)-1], false), "hi") {
		t.Fatalf("ids %v, want 1 ... 2", ids)
	}
	if plain := tok.Encode("hi", false); !slices.Equal(plain, ids[1:len(ids)-1]) {
		t.Fatalf("without special tokens %v", plain)
	}
}
