package tokenizer

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// readCorpus reads testdata/corpus.json, the strings the goldens encode.
func readCorpus(t *testing.T) []string {
	t.Helper()
	var corpus []string
	data, err := os.ReadFile(filepath.Join(testdataDir(), "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &corpus); err != nil {
		t.Fatal(err)
	}
	return corpus
}

// readVariants reads testdata/variants.json.
func readVariants(t *testing.T) []variant {
	t.Helper()
	var variants []variant
	data, err := os.ReadFile(filepath.Join(testdataDir(), "variants.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &variants); err != nil {
		t.Fatal(err)
	}
	return variants
}

// variant is one entry of testdata/variants.json: a real tokenizer.json with some top-level
// parts replaced, to cover a component or option (scripts/tokenizer-goldens/gen.py makes the
// goldens of each with the tokenizers library).
type variant struct {
	Name    string                     `json:"name"`
	Base    string                     `json:"base"`
	Overlay map[string]json.RawMessage `json:"overlay"`
}

func variantJSON(t *testing.T, v variant) []byte {
	t.Helper()
	f, err := os.Open(filepath.Join(testdataDir(), v.Base, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for k, raw := range v.Overlay {
		doc[k] = raw
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Every pre-tokenizer option (Digits with and without individual_digits, ByteLevel's
// add_prefix_space on each piece, each Split behavior, invert, string patterns, a Split before
// ByteLevel's own regex, a pattern on the regex engine) and Llama 3.1's TemplateProcessing
// give the ids of the tokenizers library.
func TestVariantGoldens(t *testing.T) {
	corpus, variants := readCorpus(t), readVariants(t)
	tks := map[string]*Tokenizer{}
	for _, v := range variants {
		tk, err := FromJSON(variantJSON(t, v), nil)
		if err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		tks[v.Name] = tk
	}
	f, err := os.Open(filepath.Join(testdataDir(), "goldens-variants.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n, fails := 0, map[string]int{}
	for sc.Scan() {
		var g struct {
			Tokenizer  string `json:"tokenizer"`
			I          int    `json:"i"`
			IDs        []int  `json:"ids"`
			IDsSpecial []int  `json:"ids_special"`
		}
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		n++
		tk, text := tks[g.Tokenizer], corpus[g.I]
		if g.IDsSpecial == nil {
			g.IDsSpecial = g.IDs
		}
		got, gotSpecial := tk.Encode(text, false), tk.Encode(text, true)
		if !eq(got, g.IDs) || !eq(gotSpecial, g.IDsSpecial) {
			if fails[g.Tokenizer]++; fails[g.Tokenizer] <= 3 {
				t.Errorf("%s Encode(%q)\n got %v / %v\nwant %v / %v", g.Tokenizer, text, got, gotSpecial, g.IDs, g.IDsSpecial)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n != len(variants)*len(corpus) {
		t.Fatalf("%d goldens for %d variants of %d strings", n, len(variants), len(corpus))
	}
	if len(fails) > 0 {
		t.Fatalf("encodings differ: %v", fails)
	}
}

// Small fixtures whose ids come from the tokenizers library (0.22.1): unk_token for a byte the
// vocabulary lacks (fused with fuse_unk, dropped without unk_token, after which neighbours
// merge), and ByteLevel's add_prefix_space on each piece between added tokens.
func TestUnknownBytesAndPrefixSpace(t *testing.T) {
	unk := func(unkToken string, fuse bool) string {
		u := "null"
		if unkToken != "" {
			u = `"` + unkToken + `"`
		}
		f := "false"
		if fuse {
			f = "true"
		}
		return `{"model":{"type":"BPE","unk_token":` + u + `,"fuse_unk":` + f + `,"vocab":{"a":0,"b":1,"ab":2,"<unk>":3},"merges":["a b"]},
			"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}}`
	}
	prefix := `{"added_tokens":[{"id":3,"content":"<s>","special":true}],"model":{"type":"BPE","vocab":{"a":0,"Ġ":1,"Ġa":2,"<s>":3},"merges":["Ġ a"]},
		"pre_tokenizer":{"type":"ByteLevel","add_prefix_space":true,"trim_offsets":true,"use_regex":true}}`
	for _, c := range []struct {
		tok, text string
		want      []int
	}{
		{unk("<unk>", false), "axxb", []int{0, 3, 3, 1}},
		{unk("<unk>", false), "xyab", []int{3, 3, 2}},
		{unk("<unk>", false), "a b", []int{0, 3, 1}},
		{unk("<unk>", true), "axxb", []int{0, 3, 1}},
		{unk("<unk>", true), "xyab", []int{3, 2}},
		{unk("", false), "axxb", []int{2}},
		{prefix, "", nil},
		{prefix, " ", []int{1}},
		{prefix, "a", []int{2}},
		{prefix, "<s>a", []int{3, 2}},
		{prefix, "a<s>", []int{2, 3}},
		{prefix, " <s> a", []int{1, 3, 2}},
	} {
		tk, err := FromJSON([]byte(c.tok), nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := tk.Encode(c.text, false); !eq(got, c.want) {
			t.Errorf("%s\nEncode(%q) = %v, want %v", c.tok, c.text, got, c.want)
		}
	}
}

// Added tokens with normalized true are found in the normalized text, the others in the raw
// text before normalization (ids from the tokenizers library 0.22.1).
func TestNormalizedAddedTokens(t *testing.T) {
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	for _, c := range []struct {
		normalized bool
		text       string
		want       []int
	}{
		{false, "\u00e9x", []int{256}},
		{false, "e\u0301x", []int{195, 169, 120}},
		{false, "ae\u0301xb", []int{97, 195, 169, 120, 98}},
		{true, "\u00e9x", []int{256}},
		{true, "e\u0301x", []int{256}},
		{true, "ae\u0301xb", []int{97, 256, 98}},
	} {
		doc, _ := json.Marshal(map[string]any{
			"added_tokens":  []any{map[string]any{"id": 256, "content": "\u00e9x", "normalized": c.normalized}},
			"normalizer":    map[string]any{"type": "NFC"},
			"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
			"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}},
		})
		tk, err := FromJSON(doc, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := tk.Encode(c.text, false); !eq(got, c.want) {
			t.Errorf("normalized %v: Encode(%q) = %v, want %v", c.normalized, c.text, got, c.want)
		}
	}
}

// Components and options Hone does not implement are refused at load, by name.
func TestLoadRefusesUnimplemented(t *testing.T) {
	bl := `{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}`
	withPre := func(pre string) string {
		return `{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"pre_tokenizer":` + pre + `}`
	}
	spmWith := func(rest string) string {
		return `{"model":{"type":"BPE","vocab":{"a":0},"merges":[],"byte_fallback":true},"pre_tokenizer":null,` + rest + `}`
	}
	for doc, want := range map[string]string{
		withPre(`{"type":"Sequence","pretokenizers":[{"type":"Whitespace"},` + bl + `]}`):                                                                                                                         `"Whitespace"`,
		withPre(`{"type":"Metaspace","replacement":"▁","prepend_scheme":"sometimes"}`):                                                                                                                            `"sometimes"`,
		withPre(`{"type":"Sequence","pretokenizers":[{"type":"Digits"},{"type":"Metaspace","replacement":"▁"}]}`):                                                                                                 "Metaspace after",
		withPre(`{"type":"Sequence","pretokenizers":[{"type":"Metaspace","replacement":"▁"},` + bl + `]}`):                                                                                                        "Metaspace and ByteLevel",
		withPre(`{"type":"Metaspace","replacement":"__"}`):                                                                                                                                                        "not one character",
		withPre(`{"type":"Sequence","pretokenizers":[` + bl + `,{"type":"Digits","individual_digits":true}]}`):                                                                                                    `"Digits" after ByteLevel`,
		withPre(`{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"a"},"behavior":"Merged"},` + bl + `]}`):                                                                                  `behavior "Merged"`,
		withPre(`{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"String":""},"behavior":"Isolated"},` + bl + `]}`):                                                                                "empty pattern",
		withPre(`{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?<"},"behavior":"Isolated"},` + bl + `]}`):                                                                              "split pattern",
		withPre(`{"type":"Digits","individual_digits":true}`):                                                                                                                                                     "no decoder",
		spmWith(`"decoder":{"type":"ByteLevel"}`):                                                                                                                                                                 `"ByteLevel" is not supported`,
		spmWith(`"decoder":{"type":"CTC"}`):                                                                                                                                                                       `"CTC"`,
		spmWith(`"decoder":{"type":"Sequence","decoders":[{"type":"Strip","content":" ","start":1,"stop":0},{"type":"Fuse"}]}`):                                                                                   "Strip",
		spmWith(`"decoder":{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"Strip","content":" ","start":0,"stop":1}]}`):                                                                                   "Strip",
		spmWith(`"decoder":{"type":"Sequence","decoders":[{"type":"Fuse"},{"type":"ByteFallback"}]}`):                                                                                                             `"ByteFallback" after Fuse`,
		spmWith(`"decoder":{"type":"Replace","pattern":{"Regex":" +"},"content":" "}`):                                                                                                                            `"Replace"`,
		spmWith(`"decoder":{"type":"Fuse"},"normalizer":{"type":"Replace","pattern":{"Regex":" +"},"content":"▁"}`):                                                                                               `"Replace"`,
		spmWith(`"decoder":{"type":"Fuse"},"normalizer":{"type":"Precompiled"}`):                                                                                                                                  `"Precompiled"`,
		`{"model":{"type":"BPE","vocab":{"a":0},"dropout":0.1},"pre_tokenizer":` + bl + `}`:                                                                                                                       "dropout",
		`{"model":{"type":"BPE","vocab":{"a":0},"continuing_subword_prefix":"##"},"pre_tokenizer":` + bl + `}`:                                                                                                    "continuing_subword_prefix",
		`{"model":{"type":"BPE","vocab":{"a":0},"end_of_word_suffix":"</w>"},"pre_tokenizer":` + bl + `}`:                                                                                                         "end_of_word_suffix",
		`{"model":{"type":"BPE","vocab":{"a":0},"byte_fallback":true},"pre_tokenizer":` + bl + `}`:                                                                                                                "byte_fallback",
		`{"model":{"type":"BPE","vocab":{"a":0}},"pre_tokenizer":` + bl + `,"post_processor":{"type":"RobertaProcessing"}}`:                                                                                       `"RobertaProcessing"`,
		`{"model":{"type":"BPE","vocab":{"a":0}},"pre_tokenizer":` + bl + `,"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>"}},{"Sequence":{"id":"A"}}],"special_tokens":{}}}`: `"<s>"`,
		`{"model":{"type":"BPE","vocab":{"a":0}},"pre_tokenizer":` + bl + `,"decoder":{"type":"Metaspace"}}`:                                                                                                      `"Metaspace"`,
		`{"model":{"type":"BPE","vocab":{"a":0}},"pre_tokenizer":` + bl + `,"normalizer":{"type":"Replace"}}`:                                                                                                     `"Replace"`,
		`{"model":{"type":"WordPiece","vocab":{"a":0}},"pre_tokenizer":` + bl + `}`:                                                                                                                               `"WordPiece"`,
	} {
		_, err := FromJSON([]byte(doc), nil)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %s", doc, err, want)
		}
	}
}

// Every split behavior covers the text in order: the pieces, joined, are the text (without
// the matches for Removed), and none is empty.
func FuzzSplitBehaviors(f *testing.F) {
	for _, s := range []string{"a  b\n\n c", "12 345x6", " ", "", "٣٤ ½ é\u00a0😀", "\t\ta"} {
		f.Add(s)
	}
	finders := map[string]finder{
		"space": regexFinder(regexp2.MustCompile(`\s+`, regexp2.Unicode)),
		"empty": regexFinder(regexp2.MustCompile(`x*`, regexp2.Unicode)),
		"digit": charFinder(unicode.IsNumber),
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) {
			return
		}
		for fname, fd := range finders {
			for _, behavior := range []string{"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"} {
				for _, invert := range []bool{false, true} {
					st, err := splitStage(fd, behavior, invert)
					if err != nil {
						t.Fatal(err)
					}
					var joined strings.Builder
					st(s, func(p string) {
						if p == "" {
							t.Fatalf("%s %s: empty piece", fname, behavior)
						}
						joined.WriteString(p)
					})
					want := s
					if behavior == "Removed" {
						var w strings.Builder
						fd(s, func(a, b int, m bool) {
							if m == invert {
								w.WriteString(s[a:b])
							}
						})
						want = w.String()
					}
					if joined.String() != want {
						t.Fatalf("%s %s invert=%v: pieces join to %q, want %q", fname, behavior, invert, joined.String(), want)
					}
				}
			}
		}
	})
}
