package tokenizer

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

var (
	loadOnce sync.Once
	loaded   map[string]*Tokenizer
	loadErr  error
)

// testdataDir is the directory holding the committed real tokenizers (llama3, qwen3, gpt2,
// smollm2).
func testdataDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "testdata")
}

func tokenizers(t testing.TB) map[string]*Tokenizer {
	loadOnce.Do(func() {
		loaded = map[string]*Tokenizer{}
		for _, n := range []string{"llama3", "qwen3", "gpt2", "smollm2"} {
			tk, err := Load(filepath.Join(testdataDir(), n))
			if err != nil {
				loadErr = fmt.Errorf("%s: %w", n, err)
				return
			}
			loaded[n] = tk
		}
	})
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	return loaded
}

type golden struct {
	Tokenizer   string `json:"tokenizer"`
	Text        string `json:"text"`
	IDs         []int  `json:"ids"`
	IDsSpecial  []int  `json:"ids_special"`
	Decoded     string `json:"decoded"`
	DecodedSkip string `json:"decoded_skip"`
}

func readGoldens(t testing.TB) []golden {
	f, err := os.Open(filepath.Join(testdataDir(), "goldens.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []golden
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var g golden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		out = append(out, g)
	}
	return out
}

func eq(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Ids and decodings agree with Hugging Face tokenizers on the hard corpus.
func TestGoldens(t *testing.T) {
	tks := tokenizers(t)
	gs := readGoldens(t)
	if len(gs) < 900 {
		t.Fatalf("only %d goldens", len(gs))
	}
	fails := 0
	for _, g := range gs {
		tk := tks[g.Tokenizer]
		got := tk.Encode(g.Text, false)
		if !eq(got, g.IDs) {
			fails++
			if fails < 15 {
				t.Errorf("%s Encode(%q)\n got %v\nwant %v", g.Tokenizer, g.Text, got, g.IDs)
			}
			continue
		}
		if got := tk.Encode(g.Text, true); !eq(got, g.IDsSpecial) {
			t.Errorf("%s Encode(%q, special) = %v, want %v", g.Tokenizer, g.Text, got, g.IDsSpecial)
		}
		if got := tk.Decode(g.IDs, false); got != g.Decoded {
			t.Errorf("%s Decode(%v) = %q, want %q", g.Tokenizer, g.IDs, got, g.Decoded)
		}
		if got := tk.Decode(g.IDs, true); got != g.DecodedSkip {
			t.Errorf("%s Decode(%v, skip) = %q, want %q", g.Tokenizer, g.IDs, got, g.DecodedSkip)
		}
	}
	if fails > 0 {
		t.Fatalf("%d of %d encodings differ", fails, len(gs))
	}
}

// The incremental decoder emits the same text as Decode, never half a character.
func TestIncrementalDecoder(t *testing.T) {
	for name, tk := range tokenizers(t) {
		for _, g := range readGoldens(t) {
			if g.Tokenizer != name {
				continue
			}
			for _, skip := range []bool{false, true} {
				d := tk.NewDecoder(skip)
				var sb strings.Builder
				for _, id := range g.IDs {
					piece := d.Add(id)
					if !utf8.ValidString(piece) {
						t.Fatalf("%s: invalid UTF-8 piece %q", name, piece)
					}
					if strings.ContainsRune(piece, utf8.RuneError) && !strings.ContainsRune(g.Decoded, utf8.RuneError) {
						t.Fatalf("%s: replacement character emitted mid-stream for %q", name, g.Text)
					}
					sb.WriteString(piece)
				}
				sb.WriteString(d.Flush())
				want := g.Decoded
				if skip {
					want = g.DecodedSkip
				}
				if sb.String() != want {
					t.Fatalf("%s: streamed %q, want %q", name, sb.String(), want)
				}
			}
		}
	}
}

func TestAccessorsAndConfig(t *testing.T) {
	tks := tokenizers(t)
	q := tks["qwen3"]
	if id, ok := q.EOS(); !ok || q.TokenString(id) != "<|im_end|>" || !q.IsSpecial(id) {
		t.Fatalf("qwen3 EOS = %d %v", id, ok)
	}
	if _, ok := q.BOS(); ok {
		t.Fatal("qwen3 has no BOS")
	}
	if q.VocabSize() != 151669 {
		t.Fatalf("qwen3 vocab %d", q.VocabSize())
	}
	if !strings.Contains(q.ChatTemplate(""), "<|im_start|>") {
		t.Fatal("qwen3 chat template missing")
	}
	l := tks["llama3"]
	if id, ok := l.BOS(); !ok || id != 128000 {
		t.Fatalf("llama3 BOS = %d", id)
	}
	id, _ := q.TokenID("Ġworld")
	if string(q.TokenBytes(id)) != " world" {
		t.Fatalf("TokenBytes = %q", q.TokenBytes(id))
	}
	if q.TokenBytes(-1) != nil || q.TokenString(1<<30) != "" {
		t.Fatal("out-of-range ids")
	}
}

func TestLossyUTF8(t *testing.T) {
	cases := map[string]string{
		"ok":               "ok",
		"\xff\xfe":         "\uFFFD\uFFFD",
		"a\xe2\x82":        "a\uFFFD",
		"\xe2\x82\xac":     "€",
		"\xf0\x9f\x98":     "\uFFFD",
		"\xed\xa0\x80x":    "\uFFFD\uFFFD\uFFFDx",
		"\xc0\xafz":        "\uFFFD\uFFFDz",
		"\xf4\x90\x80\x80": "\uFFFD\uFFFD\uFFFD\uFFFD",
	}
	for in, want := range cases {
		if got := lossyUTF8([]byte(in)); got != want {
			t.Errorf("lossyUTF8(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	for _, bad := range []string{
		`{`, `{"model":{"type":"Unigram"}}`,
		`{"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]},"pre_tokenizer":{"type":"ByteLevel"}}`,
		`{"model":{"type":"BPE","vocab":{"a":0}},"pre_tokenizer":{"type":"Whitespace"}}`,
		`{"model":{"type":"BPE","vocab":{"a":0}},"pre_tokenizer":{"type":"ByteLevel"},"decoder":{"type":"WordPiece"}}`,
		`{"model":{"type":"BPE","vocab":{"a":0}},"pre_tokenizer":{"type":"ByteLevel"},"normalizer":{"type":"Precompiled"}}`,
	} {
		if _, err := FromJSON([]byte(bad), nil); err == nil {
			t.Errorf("FromJSON(%s) accepted", bad)
		}
	}
}

func FuzzEncodeDecode(f *testing.F) {
	for _, s := range []string{"hello world", "日本語 😀", "  \n\t x", "<|im_end|>a", "I'm 123456"} {
		f.Add(s)
	}
	tks := tokenizers(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		for name, tk := range tks {
			ids := tk.Encode(s, false)
			back := tk.Decode(ids, false)
			// Normalization may change text, and bytes the vocabulary cannot spell are
			// dropped (SmolLM2 lacks a few): decoding gives the normalized, spellable form.
			want := ""
			tk.splitAdded(s, func(piece string, id int32) {
				if id >= 0 {
					want += piece
					return
				}
				for i := 0; i < len(piece); i++ {
					if tk.byteToken[piece[i]] >= 0 {
						want += piece[i : i+1]
					}
				}
			})
			want = lossyUTF8([]byte(want))
			if back != want {
				t.Fatalf("%s: Decode(Encode(%q)) = %q", name, s, back)
			}
		}
	})
}

func FuzzFromJSON(f *testing.F) {
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},"pre_tokenizer":{"type":"ByteLevel"}}`))
	f.Add([]byte(`{"added_tokens":[{"id":3,"content":"<x>","special":true}],"model":{"type":"BPE","vocab":{"a":0},"merges":[["a","a"]]},"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\s+"},"behavior":"Isolated"},{"type":"ByteLevel","use_regex":false}]}}`))
	f.Add([]byte(`{"added_tokens":[{"id":3,"content":"<x>","special":true}],"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"1":3},"merges":["a b"],"unk_token":"1","fuse_unk":true},"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Digits","individual_digits":false},{"type":"Split","pattern":{"String":"a"},"behavior":"MergedWithNext","invert":true},{"type":"ByteLevel","add_prefix_space":true}]},"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<x>"}},{"Sequence":{"id":"A"}}],"special_tokens":{"<x>":{"ids":[3,3]}}}}`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\d"},"behavior":"Contiguous"}]},{"type":"Split","pattern":{"Regex":" "},"behavior":"Removed"},{"type":"ByteLevel","use_regex":true}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tk, err := FromJSON(data, nil)
		if err != nil {
			return
		}
		_ = tk.Decode(tk.Encode("hello <x> wörld  12", true), false)
	})
}
