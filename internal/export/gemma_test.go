package export_test

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/export"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/tokenizer"
)

// The Gemma fixtures: a tiny random Gemma 2 and Gemma 3 in the shape llama.cpp computes (its
// sliding-layer pattern, a query scale of head_dim, Gemma 3's local RoPE base of 10000) with
// the SentencePiece test vocabulary of internal/tokenizer (800 pieces), as Gemma's are.

// spmFixture is internal/tokenizer's SentencePiece test vocabulary.
var spmFixture = filepath.Join("..", "tokenizer", "testdata", "spm")

// writeGemmaFixture writes the arch fixture into dir.
func writeGemmaFixture(t testing.TB, arch, dir string) {
	t.Helper()
	o := synth.Tiny(arch)
	o.Vocab, o.Std = 800, 0.1 // varied greedy text (larger weights repeat one token)
	o.QueryPreAttnScalar = float64(o.HeadDim)
	pattern := 2
	if arch == "gemma3" {
		o.Layers, o.RopeTheta, pattern = 6, 100000, 6 // synth's local base is a tenth: 10000
	}
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	editConfig(t, dir, func(cfg map[string]any) {
		types := make([]string, o.Layers)
		for l := range types {
			types[l] = "sliding_attention"
			if l%pattern == pattern-1 {
				types[l] = "full_attention"
			}
		}
		cfg["layer_types"] = types
	})
	useSPMTokenizer(t, dir)
}

// editConfig rewrites dir's config.json through edit.
func editConfig(t testing.TB, dir string, edit func(cfg map[string]any)) {
	t.Helper()
	var cfg map[string]any
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	edit(cfg)
	raw, _ = json.MarshalIndent(cfg, "", " ")
	if err := os.WriteFile(filepath.Join(dir, "config.json"), raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// useSPMTokenizer gives the synthetic model in dir (of 800 embeddings) internal/tokenizer's
// SentencePiece test vocabulary: its tokenizer.model, tokenizer.json and tokenizer_config.json,
// and config.json's special token ids (<s> 1, </s> 2, <unk> 0).
func useSPMTokenizer(t testing.TB, dir string) {
	t.Helper()
	editConfig(t, dir, func(cfg map[string]any) {
		cfg["bos_token_id"], cfg["eos_token_id"], cfg["pad_token_id"] = 1, 2, 0
	})
	os.Remove(filepath.Join(dir, "generation_config.json"))
	for _, f := range []string{"tokenizer.model", "legacy/tokenizer_config.json", "legacy/tokenizer.json.gz"} {
		in, err := os.Open(filepath.Join(spmFixture, f))
		if err != nil {
			t.Fatal(err)
		}
		var r io.Reader = in
		name := filepath.Base(f)
		if strings.HasSuffix(f, ".gz") {
			if r, err = gzip.NewReader(in); err != nil {
				t.Fatal(err)
			}
			name = strings.TrimSuffix(name, ".gz")
		}
		b, err := io.ReadAll(r)
		in.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// gemmaExport writes the arch fixture and its f32 GGUF export, and returns both paths.
func gemmaExport(t *testing.T, arch string) (dir, path string) {
	t.Helper()
	dir = t.TempDir()
	writeGemmaFixture(t, arch, dir)
	path = filepath.Join(t.TempDir(), arch+".gguf")
	if err := export.WriteGGUF(path, dir, nil, "f32", ""); err != nil {
		t.Fatal(err)
	}
	return dir, path
}

// TestWriteGemmaFixtures writes the fixtures into $HONE_GEMMA_FIXTURES/<arch> for
// scripts/gguf-goldens/gemma_layout.sh, which runs llama.cpp's converter on them (into a
// temporary directory without the variable), and checks what it wrote: a model Hone loads with
// llama.cpp's sliding-layer pattern and the SentencePiece vocabulary.
func TestWriteGemmaFixtures(t *testing.T) {
	out := os.Getenv("HONE_GEMMA_FIXTURES")
	if out == "" {
		out = t.TempDir()
	}
	for arch, pattern := range map[string]int{"gemma2": 2, "gemma3": 6} {
		dir := filepath.Join(out, arch)
		writeGemmaFixture(t, arch, dir)
		cfg, err := model.LoadConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		for l := range cfg.NumLayers {
			if cfg.IsSliding(l) != (l%pattern < pattern-1) {
				t.Fatalf("%s: layer %d sliding %v, not llama.cpp's pattern of %d", arch, l, cfg.IsSliding(l), pattern)
			}
		}
		tok, err := tokenizer.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		if tok.VocabSize() != cfg.VocabSize {
			t.Fatalf("%s: %d tokens for %d embeddings", arch, tok.VocabSize(), cfg.VocabSize)
		}
		if _, err := os.Stat(filepath.Join(dir, "tokenizer.model")); err != nil {
			t.Fatal(err)
		}
	}
}

// gemmaLayout is testdata/gemma-llamacpp-layout.json: per architecture, the metadata
// llama.cpp's converter wrote for the fixture (all but the vocabulary's arrays) and each
// tensor's name, dimensions, type and the SHA-256 of its f32 bytes.
type gemmaLayout struct {
	Gemma2 archLayout `json:"gemma2"`
	Gemma3 archLayout `json:"gemma3"`
}

type archLayout struct {
	Metadata map[string]any `json:"metadata"`
	Tensors  [][]any        `json:"tensors"`
}

// TestExportGGUFGemmaMatchesConverter: the f32 GGUF export of the Gemma 2 and Gemma 3
// fixtures holds what llama.cpp's convert_hf_to_gguf.py writes for them: the same metadata
// (architecture, hyperparameters, tokenizer flags and ids) and the same tensors, names,
// dimensions and bytes, norms stored as 1 + weight included; and it loads back into Hone with
// the directory's logits.
func TestExportGGUFGemmaMatchesConverter(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "gemma-llamacpp-layout.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want gemmaLayout
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	for _, arch := range []string{"gemma2", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			dir, path := gemmaExport(t, arch)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			w := want.Gemma2
			if arch == "gemma3" {
				w = want.Gemma3
			}
			for k, v := range w.Metadata {
				g, ok := f.Metadata.Get(k)
				if !ok {
					t.Errorf("metadata %s missing (converter: %v)", k, v)
					continue
				}
				if !sameJSON(g, v) {
					t.Errorf("metadata %s: Hone %v, converter %v", k, g, v)
				}
			}
			for _, k := range f.Metadata.Keys() {
				if _, ok := w.Metadata[k]; !ok && !strings.HasPrefix(k, "tokenizer.ggml.tokens") && k != "tokenizer.ggml.scores" && k != "tokenizer.ggml.token_type" {
					t.Errorf("metadata %s: the converter writes no such key", k)
				}
			}
			var got [][]any
			for _, name := range f.Names() {
				ti := f.Tensors[name]
				data, err := f.Tensor(name)
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(data)
				dims := make([]any, len(ti.Dims))
				for i, d := range ti.Dims {
					dims[i] = float64(d)
				}
				got = append(got, []any{name, dims, ti.Type.String(), hex.EncodeToString(sum[:])})
			}
			key := func(v [][]any) []string {
				out := make([]string, len(v))
				for i, e := range v {
					out[i] = fmt.Sprint(e)
				}
				sort.Strings(out)
				return out
			}
			if g, w := key(got), key(w.Tensors); !reflect.DeepEqual(g, w) {
				t.Errorf("tensors differ from the converter's\n Hone %v\nconverter %v", g, w)
			}

			// Hone reads its export back as the directory.
			hf, err := model.Load(dir, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer hf.Close()
			gm, err := model.Load(path, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer gm.Close()
			prompt := []int{1, 300, 301, 302, 450, 17, 600, 799, 5, 42, 100, 200, 250}
			wl, gl := lastLogitsOf(t, hf, prompt), lastLogitsOf(t, gm, prompt)
			worst := 0.0
			for i := range wl {
				worst = max(worst, math.Abs(float64(gl[i]-wl[i])))
			}
			if worst > 1e-4 {
				t.Fatalf("logits of the export differ from the directory's by up to %.3g", worst)
			}
			// The quantized exports load too.
			for _, typ := range []string{"q8_0", "q4_k"} {
				qp := filepath.Join(t.TempDir(), typ+".gguf")
				if err := export.WriteGGUF(qp, dir, nil, typ, ""); err != nil {
					t.Fatal(err)
				}
				qm, err := model.Load(qp, model.LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				ql := lastLogitsOf(t, qm, prompt)
				qm.Close()
				for _, v := range ql {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("%s export: logit %v", typ, v)
					}
				}
				// Q8_0 keeps the random model's greedy choice; Q4_K (mostly Q5_0 for rows of 64)
				// moves its close logits too much to ask that.
				if a, b := argmaxOf(ql), argmaxOf(wl); typ == "q8_0" && a != b {
					t.Errorf("%s export: greedy next token %d, the directory's %d", typ, a, b)
				}
			}
		})
	}
}

// sameJSON compares a GGUF value with the golden's JSON value (numbers as float64, floats
// stored as float32).
func sameJSON(g, w any) bool {
	switch w := w.(type) {
	case float64:
		switch g := g.(type) {
		case float32:
			return g == float32(w)
		case uint32:
			return float64(g) == w
		case int32:
			return float64(g) == w
		case uint64:
			return float64(g) == w
		}
		return false
	case []any:
		gb, _ := json.Marshal(g)
		wb, _ := json.Marshal(w)
		return string(gb) == string(wb)
	}
	return fmt.Sprint(g) == fmt.Sprint(w)
}

func argmaxOf(v []float32) int {
	best := 0
	for i, x := range v {
		if x > v[best] {
			best = i
		}
	}
	return best
}

// lastLogitsOf runs the prompt through m and returns the last position's logits.
func lastLogitsOf(t *testing.T, m *model.Model, prompt []int) []float32 {
	t.Helper()
	seq := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: 8}).NewSequence()
	l, err := m.Forward([]model.Step{{Seq: seq, Tokens: prompt, LogitsAt: []int{len(prompt) - 1}}})
	if err != nil {
		t.Fatal(err)
	}
	return l[0][0]
}

// TestExportGGUFGemmaLlamaCpp runs llama.cpp (HONE_LLAMA_CPP) on the f32 exports of the Gemma
// fixtures: its greedy continuation equals Hone's on the same file.
func TestExportGGUFGemmaLlamaCpp(t *testing.T) {
	bin := fixture(t, "HONE_LLAMA_CPP", "llama.cpp's binaries")
	for _, arch := range []string{"gemma2", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			_, path := gemmaExport(t, arch)
			// llama-cli prints a byte token that is not whole UTF-8 as its byte, Hone's Decode as
			// U+FFFD: both become "?".
			bad := regexp.MustCompile(`\x{FFFD}+`)
			clean := func(s string) string { return bad.ReplaceAllString(strings.ToValidUTF8(s, "\uFFFD"), "?") }
			for _, prompt := range []string{"The quick brown fox", "Hello world, this is a test of",
				"Numbers 0123456789 and symbols are here too, in a longer prompt than the window of eight"} {
				_, hone := honeGreedyOn(t, path, prompt, 24)
				got := llamaGenerateOn(t, bin, prompt, 24, "-m", path)
				t.Logf("%q: llama.cpp continues %q", prompt, got)
				if clean(got) != clean(hone) {
					t.Errorf("%q: llama.cpp continues %q, Hone %q", prompt, got, hone)
				}
			}
		})
	}
}

// TestExportGGUFGemmaRefusals: a Gemma that llama.cpp would compute differently has no GGUF
// form, and the export says why, naming what differs.
func TestExportGGUFGemmaRefusals(t *testing.T) {
	for _, c := range []struct {
		arch, name string
		edit       func(cfg map[string]any)
		want       string
	}{
		{"gemma3", "layer pattern", func(cfg map[string]any) {
			cfg["layer_types"] = []string{"sliding_attention", "full_attention", "sliding_attention", "full_attention", "sliding_attention", "full_attention"}
		}, "every sixth"},
		{"gemma2", "query scale", func(cfg map[string]any) { cfg["query_pre_attn_scalar"] = 24 }, "query_pre_attn_scalar 24"},
		{"gemma3", "local RoPE base", func(cfg map[string]any) { cfg["rope_local_base_freq"] = 20000 }, "rope_local_base_freq 20000"},
		{"gemma3", "final soft-cap", func(cfg map[string]any) { cfg["final_logit_softcapping"] = 30 }, "final_logit_softcapping 30"},
		{"gemma2", "no soft-cap", func(cfg map[string]any) { cfg["final_logit_softcapping"] = nil }, "uncapped"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeGemmaFixture(t, c.arch, dir)
			editConfig(t, dir, c.edit)
			out := filepath.Join(t.TempDir(), "x.gguf")
			err := export.WriteGGUF(out, dir, nil, "f32", "")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "no GGUF form") {
				t.Fatalf("export: %v; want an error naming %q", err, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("a refused export left %s", out)
			}
		})
	}
}
