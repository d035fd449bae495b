package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/gguf"
)

// The SentencePiece test vocabulary (testdata/spm, made by scripts/tokenizer-goldens/spm.py):
// a BPE model trained with byte fallback, as GGUF metadata and as transformers' tokenizer.json.

func spmDir() string { return filepath.Join(testdataDir(), "spm") }

// hfGolden is what tokenizers gives for one string.
type hfGolden struct {
	IDs         []int  `json:"ids"`
	IDsSpecial  []int  `json:"ids_special"`
	Decoded     string `json:"decoded"`
	DecodedSkip string `json:"decoded_skip"`
}

// spmGolden is one line of goldens-spm.jsonl: sentencepiece's ids and decoding (with control
// tokens in the text split off as llama.cpp does), with and without the dummy prefix, and
// tokenizers' for each tokenizer.json form and variant.
type spmGolden struct {
	Text              string `json:"text"`
	SPM               []int  `json:"spm"`
	SPMDecoded        string `json:"spm_decoded"`
	SPMNoSpace        []int  `json:"spm_nospace"`
	SPMNoSpaceDecoded string `json:"spm_nospace_decoded"`
	HF                map[string]hfGolden
}

func readSPMGoldens(t testing.TB) []spmGolden {
	f, err := os.Open(filepath.Join(spmDir(), "goldens-spm.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []spmGolden
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var g spmGolden
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatal(err)
		}
		var all map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &all); err != nil {
			t.Fatal(err)
		}
		g.HF = map[string]hfGolden{}
		for k, raw := range all {
			var h hfGolden
			if raw[0] == '{' {
				if err := json.Unmarshal(raw, &h); err != nil {
					t.Fatal(err)
				}
				g.HF[k] = h
			}
		}
		out = append(out, g)
	}
	if len(out) < 30 {
		t.Fatalf("only %d SentencePiece goldens", len(out))
	}
	return out
}

// spmGGUF reads testdata/spm/spm.gguf's metadata with extra keys added.
func spmGGUF(t testing.TB, extra ...gguf.KV) *Tokenizer {
	t.Helper()
	f, err := gguf.Open(filepath.Join(spmDir(), "spm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var meta []gguf.KV
	for _, k := range f.Metadata.Keys() {
		v, _ := f.Metadata.Get(k)
		meta = append(meta, gguf.KV{Key: k, Value: v})
	}
	meta = append(meta, extra...)
	var buf bytes.Buffer
	if err := gguf.Write(&buf, meta, nil); err != nil {
		t.Fatal(err)
	}
	g, err := gguf.Parse(buf.Bytes(), "spm.gguf")
	if err != nil {
		t.Fatal(err)
	}
	tk, err := FromGGUF(g.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// spmJSON loads a tokenizer.json form (legacy, metaspace) or a variant of variants.json.
func spmJSON(t testing.TB, name string) *Tokenizer {
	t.Helper()
	if name == "legacy" || name == "metaspace" {
		tk, err := Load(filepath.Join(spmDir(), name))
		if err != nil {
			t.Fatal(err)
		}
		return tk
	}
	data, err := os.ReadFile(filepath.Join(spmDir(), "variants.json"))
	if err != nil {
		t.Fatal(err)
	}
	var variants map[string]map[string]json.RawMessage
	if err := json.Unmarshal(data, &variants); err != nil {
		t.Fatal(err)
	}
	base, err := readMaybeGz(filepath.Join(spmDir(), "metaspace", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(base, &doc); err != nil {
		t.Fatal(err)
	}
	overlay, ok := variants[name]
	if !ok {
		t.Fatalf("no variant %q", name)
	}
	for k, v := range overlay {
		doc[k] = v
	}
	tj, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := FromJSON(tj, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// checkStreaming checks that the incremental decoder gives Decode's text.
func checkStreaming(t *testing.T, tk *Tokenizer, ids []int, skip bool) {
	t.Helper()
	d := tk.NewDecoder(skip)
	var sb strings.Builder
	for _, id := range ids {
		sb.WriteString(d.Add(id))
	}
	sb.WriteString(d.Flush())
	if want := tk.Decode(ids, skip); sb.String() != want {
		t.Errorf("streamed %v: %q, Decode %q", ids, sb.String(), want)
	}
}

// The GGUF form gives sentencepiece's ids (control tokens in the text split off as llama.cpp
// does), a BOS with special tokens, and sentencepiece's decoding when special tokens are
// skipped; with tokenizer.ggml.add_space_prefix false, those of sentencepiece without the
// dummy prefix.
func TestSPMGGUFGoldens(t *testing.T) {
	gs := readSPMGoldens(t)
	for _, c := range []struct {
		name  string
		extra []gguf.KV
	}{{"prefix", nil}, {"no prefix", []gguf.KV{{Key: "tokenizer.ggml.add_space_prefix", Value: false}}}} {
		t.Run(c.name, func(t *testing.T) {
			tk := spmGGUF(t, c.extra...)
			for _, g := range gs {
				want, wantText := g.SPM, g.SPMDecoded
				if c.extra != nil {
					want, wantText = g.SPMNoSpace, g.SPMNoSpaceDecoded
				}
				got := tk.Encode(g.Text, false)
				if !slices.Equal(got, want) {
					t.Errorf("Encode(%q) = %v, want %v", g.Text, got, want)
					continue
				}
				if got := tk.Encode(g.Text, true); !slices.Equal(got, append([]int{1}, want...)) {
					t.Errorf("Encode(%q, special) = %v, want BOS then %v", g.Text, got, want)
				}
				// sentencepiece writes the unknown token as " ⁇ "; Hone, like tokenizers, skips
				// it with the special tokens.
				if got := tk.Decode(want, true); got != wantText && !slices.Contains(want, 0) {
					t.Errorf("Decode(%v, skip) = %q, want %q", want, got, wantText)
				}
				if c.extra == nil {
					// tokenizers' legacy tokenizer.json has the same ids; its decoding keeps
					// the special tokens' text.
					if h := g.HF["legacy"]; slices.Equal(h.IDs, want) && tk.Decode(want, false) != h.Decoded {
						t.Errorf("Decode(%v) = %q, want %q", want, tk.Decode(want, false), h.Decoded)
					}
				}
				checkStreaming(t, tk, want, false)
				checkStreaming(t, tk, want, true)
			}
		})
	}
}

// Each tokenizer.json form (transformers' legacy and Metaspace conversions) and variant
// (Metaspace options, the Metaspace decoder) gives tokenizers' ids and decodings.
func TestSPMJSONGoldens(t *testing.T) {
	gs := readSPMGoldens(t)
	for _, name := range []string{"legacy", "metaspace", "metaspace_always_split", "metaspace_never", "metaspace_decoder"} {
		t.Run(name, func(t *testing.T) {
			tk := spmJSON(t, name)
			for _, g := range gs {
				h, ok := g.HF[name]
				if !ok {
					t.Fatalf("no %s golden for %q", name, g.Text)
				}
				if got := tk.Encode(g.Text, false); !slices.Equal(got, h.IDs) {
					t.Errorf("Encode(%q) = %v, want %v", g.Text, got, h.IDs)
					continue
				}
				if h.IDsSpecial != nil {
					if got := tk.Encode(g.Text, true); !slices.Equal(got, h.IDsSpecial) {
						t.Errorf("Encode(%q, special) = %v, want %v", g.Text, got, h.IDsSpecial)
					}
				}
				if got := tk.Decode(h.IDs, false); got != h.Decoded {
					t.Errorf("Decode(%v) = %q, want %q", h.IDs, got, h.Decoded)
				}
				if got := tk.Decode(h.IDs, true); got != h.DecodedSkip {
					t.Errorf("Decode(%v, skip) = %q, want %q", h.IDs, got, h.DecodedSkip)
				}
				checkStreaming(t, tk, h.IDs, false)
				checkStreaming(t, tk, h.IDs, true)
			}
		})
	}
}

// The GGUF form and the legacy tokenizer.json are the same tokenizer: vocabulary, special
// tokens, token bytes, BOS/EOS, add_bos_token and chat template.
func TestSPMGGUFMatchesJSON(t *testing.T) {
	g, j := spmGGUF(t), spmJSON(t, "legacy")
	if g.VocabSize() != j.VocabSize() || !slices.Equal(g.SpecialIDs(), j.SpecialIDs()) || len(g.SpecialIDs()) != 3 {
		t.Fatalf("vocabulary %d, special %v; want %d, %v", g.VocabSize(), g.SpecialIDs(), j.VocabSize(), j.SpecialIDs())
	}
	for id := range g.VocabSize() {
		if g.TokenString(id) != j.TokenString(id) || !bytes.Equal(g.TokenBytes(id), j.TokenBytes(id)) {
			t.Fatalf("token %d: %q %q, want %q %q", id, g.TokenString(id), g.TokenBytes(id), j.TokenString(id), j.TokenBytes(id))
		}
	}
	if id, ok := g.TokenID("<0x0A>"); !ok || string(g.TokenBytes(id)) != "\n" {
		t.Errorf("<0x0A> is %d %v, bytes %q", id, ok, g.TokenBytes(id))
	}
	for _, tk := range []*Tokenizer{g, j} {
		bos, okB := tk.BOS()
		eos, okE := tk.EOS()
		if !okB || !okE || bos != 1 || eos != 2 || !tk.Config().AddBOSToken || tk.Config().UnkToken != "<unk>" {
			t.Errorf("BOS %d %v, EOS %d %v, config %+v", bos, okB, eos, okE, tk.Config())
		}
		if !strings.Contains(tk.ChatTemplate(""), "[INST]") {
			t.Errorf("chat template %q", tk.ChatTemplate(""))
		}
	}
}

// llama.cpp's defaults for SentencePiece vocabularies: BOS 1, EOS 2, UNK 0 and add_bos_token
// when the keys are absent.
func TestSPMGGUFDefaults(t *testing.T) {
	f, err := gguf.Open(filepath.Join(spmDir(), "spm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var meta []gguf.KV
	for _, k := range f.Metadata.Keys() {
		if strings.HasSuffix(k, "_token_id") || strings.HasPrefix(k, "tokenizer.ggml.add_") || k == "tokenizer.ggml.pre" {
			continue
		}
		v, _ := f.Metadata.Get(k)
		meta = append(meta, gguf.KV{Key: k, Value: v})
	}
	var buf bytes.Buffer
	if err := gguf.Write(&buf, meta, nil); err != nil {
		t.Fatal(err)
	}
	p, err := gguf.Parse(buf.Bytes(), "x.gguf")
	if err != nil {
		t.Fatal(err)
	}
	tk, err := FromGGUF(p.Metadata)
	if err != nil {
		t.Fatal(err)
	}
	if ids := tk.Encode("hi", true); len(ids) < 2 || ids[0] != 1 {
		t.Errorf("Encode(hi, special) = %v, want BOS 1 first", ids)
	}
	if eos, ok := tk.EOS(); !ok || eos != 2 {
		t.Errorf("EOS %d %v", eos, ok)
	}
}

// SentencePiece GGUF metadata that Hone cannot honour is refused by name.
func TestSPMGGUFRefused(t *testing.T) {
	f, err := gguf.Open(filepath.Join(spmDir(), "spm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct {
		name string
		edit func(k string, v any) (any, bool)
		want string
	}{
		{"no scores", func(k string, v any) (any, bool) { return v, k != "tokenizer.ggml.scores" }, "tokenizer.ggml.scores"},
		{"short scores", func(k string, v any) (any, bool) {
			if k == "tokenizer.ggml.scores" {
				return v.([]float32)[:10], true
			}
			return v, true
		}, "tokenizer.ggml.scores"},
		{"pre", func(k string, v any) (any, bool) {
			if k == "tokenizer.ggml.pre" {
				return "llama-bpe", true
			}
			return v, true
		}, `"llama-bpe"`},
		{"model", func(k string, v any) (any, bool) {
			if k == "tokenizer.ggml.model" {
				return "bert", true
			}
			return v, true
		}, `"bert"`},
	} {
		var meta []gguf.KV
		for _, k := range f.Metadata.Keys() {
			v, _ := f.Metadata.Get(k)
			if v, keep := c.edit(k, v); keep {
				meta = append(meta, gguf.KV{Key: k, Value: v})
			}
		}
		var buf bytes.Buffer
		if err := gguf.Write(&buf, meta, nil); err != nil {
			t.Fatal(err)
		}
		p, err := gguf.Parse(buf.Bytes(), "x.gguf")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := FromGGUF(p.Metadata); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to name %s", c.name, err, c.want)
		}
	}
}

// FuzzSPMRoundTrip encodes and decodes with every form of the SentencePiece test vocabulary
// (seeds: the golden strings and testdata/fuzz/FuzzSPMRoundTrip). Nothing may panic, the
// incremental decoder must give Decode's text, and, for a string s that holds neither "▁"
// (U+2581, which SentencePiece reads as a space) nor the text of an added token (<unk>, <s>,
// </s>, which become those tokens), Decode(Encode(s, false), false) must be:
//   - s itself for the GGUF form with and without the dummy prefix and for the legacy
//     tokenizer.json, whose "▁" prefix the decoder strips again, as sentencepiece's
//     decode(encode(s)) == s for a model with identity normalization and byte fallback;
//   - s without one leading space for the Metaspace forms, which put no "▁" before text that
//     starts with a space (or none at all) but whose decoder strips one (as tokenizers does);
//   - for s that is not valid UTF-8 (which Hone spells with byte tokens, byte by byte), the
//     same with each invalid sequence as U+FFFD, as Decode writes it.
//
// The Metaspace decoder variant is only run: it drops every "▁" of the first token, so its
// round trip loses leading spaces in ways that depend on the merges.
func FuzzSPMRoundTrip(f *testing.F) {
	for _, g := range readSPMGoldens(f) {
		f.Add(g.Text)
	}
	forms := []struct {
		name       string
		tk         *Tokenizer
		trimSpace  bool
		roundTrips bool
	}{
		{"gguf", spmGGUF(f), false, true},
		{"gguf no prefix", spmGGUF(f, gguf.KV{Key: "tokenizer.ggml.add_space_prefix", Value: false}), false, true},
		{"legacy", spmJSON(f, "legacy"), false, true},
		{"metaspace", spmJSON(f, "metaspace"), true, true},
		{"metaspace_always_split", spmJSON(f, "metaspace_always_split"), true, true},
		{"metaspace_never", spmJSON(f, "metaspace_never"), true, true},
		{"metaspace_decoder", spmJSON(f, "metaspace_decoder"), false, false},
	}
	f.Fuzz(func(t *testing.T, s string) {
		check := !strings.Contains(s, metaspaceChar)
		for _, added := range []string{"<unk>", "<s>", "</s>"} {
			check = check && !strings.Contains(s, added)
		}
		for _, form := range forms {
			ids := form.tk.Encode(s, true)
			ids = ids[1:] // the BOS
			back := form.tk.Decode(ids, false)
			d := form.tk.NewDecoder(false)
			var sb strings.Builder
			for _, id := range ids {
				sb.WriteString(d.Add(id))
			}
			if sb.WriteString(d.Flush()); sb.String() != back {
				t.Fatalf("%s: streamed %q, Decode %q", form.name, sb.String(), back)
			}
			if !check || !form.roundTrips {
				continue
			}
			want := s
			if form.trimSpace {
				want = strings.TrimPrefix(s, " ")
			}
			if want = lossyUTF8([]byte(want)); back != want {
				t.Fatalf("%s: Decode(Encode(%q)) = %q, want %q (ids %v)", form.name, s, back, want, ids)
			}
		}
	})
}

// Byte tokens that do not make valid UTF-8 decode as Decode documents: U+FFFD for each
// maximal ill-formed subpart, the same in the incremental decoder.
func TestSPMInvalidByteTokens(t *testing.T) {
	tk := spmGGUF(t)
	id := func(s string) int {
		id, ok := tk.TokenID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return id
	}
	for _, c := range []struct {
		ids  []int
		want string
	}{
		{[]int{id("<0xE2>"), id("<0x82>")}, "\uFFFD"},
		{[]int{id("<0xE2>"), id("<0x82>"), id("<0xAC>")}, "€"},
		{[]int{id("<0xFF>"), id("<0x41>")}, "\uFFFDA"},
		{[]int{id("▁a"), id("<0xF0>"), id("<0x9F>"), id("<0x98>"), id("b")}, "a\uFFFDb"},
	} {
		if got := tk.Decode(c.ids, false); got != c.want {
			t.Errorf("Decode(%v) = %q, want %q", c.ids, got, c.want)
		}
		checkStreaming(t, tk, c.ids, false)
	}
}

// On the corpus of the byte-level goldens too, the GGUF form (merges ordered by scores, as
// llama.cpp) gives sentencepiece's ids (goldens-spm-corpus.json), and so does the legacy
// tokenizer.json (transformers' merge list).
func TestSPMCorpus(t *testing.T) {
	var corpus []string
	var want [][]int
	for name, dst := range map[string]any{"corpus.json": &corpus, "spm/goldens-spm-corpus.json": &want} {
		data, err := os.ReadFile(filepath.Join(testdataDir(), name))
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(data, dst); err != nil {
			t.Fatal(err)
		}
	}
	if len(corpus) != len(want) || len(corpus) < 300 {
		t.Fatalf("%d strings, %d goldens", len(corpus), len(want))
	}
	g, j := spmGGUF(t), spmJSON(t, "legacy")
	for i, s := range corpus {
		if got := g.Encode(s, false); !slices.Equal(got, want[i]) {
			t.Errorf("GGUF %q: %v, want %v", s, got, want[i])
		}
		if got := j.Encode(s, false); !slices.Equal(got, want[i]) {
			t.Errorf("tokenizer.json %q: %v, want %v", s, got, want[i])
		}
	}
}
