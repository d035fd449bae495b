package tokenizer

import (
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/gguf"
)

// vocabRules are the converter's vocabulary rules of the architectures the tests name, as
// package model's families give them (Family.GGUFVocab).
var vocabRules = map[string]GGUFVocabRules{
	"llama": {NoBOSFor49152: true}, "qwen2": {}, "phi3": {Phi3AddedTokens: true}, "gemma3": {NoSpacePrefix: true},
}

// spmModelDir writes a model directory with the SentencePiece test vocabulary: tokenizer.model
// and legacy/'s tokenizer.json and tokenizer_config.json, with a config.json of vocab
// embeddings.
func spmModelDir(t testing.TB, vocab int) string {
	t.Helper()
	dir := t.TempDir()
	copyFile := func(src, dst string, gz bool) {
		f, err := os.Open(src)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var r io.Reader = f
		if gz {
			if r, err = gzip.NewReader(f); err != nil {
				t.Fatal(err)
			}
		}
		b, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, dst), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(filepath.Join(spmDir(), "tokenizer.model"), "tokenizer.model", false)
	copyFile(filepath.Join(spmDir(), "legacy", "tokenizer.json.gz"), "tokenizer.json", true)
	copyFile(filepath.Join(spmDir(), "legacy", "tokenizer_config.json"), "tokenizer_config.json", false)
	cfg := fmt.Sprintf(`{"architectures":["LlamaForCausalLM"],"model_type":"llama","vocab_size":%d,"bos_token_id":1,"eos_token_id":2}`, vocab)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// writtenMeta writes meta to a GGUF file and reads it back, so that values compare with a
// file's as the reader gives them.
func writtenMeta(t testing.TB, meta []gguf.KV) *gguf.Metadata {
	t.Helper()
	path := filepath.Join(t.TempDir(), "meta.gguf")
	if err := gguf.WriteFile(path, meta, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f.Metadata
}

// TestSPMGGUFMetadataMatchesConverter: the SentencePiece vocabulary's tokenizer.* metadata is
// what llama.cpp's convert_hf_to_gguf.py --vocab-only wrote for the same directory
// (testdata/spm/convert-llama.gguf, scripts/tokenizer-goldens/spm_convert.sh), key by key.
func TestSPMGGUFMetadataMatchesConverter(t *testing.T) {
	ref, err := gguf.Open(filepath.Join(spmDir(), "convert-llama.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	meta, err := GGUFMetadata(spmModelDir(t, 800), 800, vocabRules["llama"])
	if err != nil {
		t.Fatal(err)
	}
	got := writtenMeta(t, meta)
	for _, k := range ref.Metadata.Keys() {
		if !strings.HasPrefix(k, "tokenizer.") {
			continue
		}
		w, _ := ref.Metadata.Get(k)
		g, ok := got.Get(k)
		if !ok {
			t.Errorf("%s missing (converter: %.80v)", k, w)
			continue
		}
		if !reflect.DeepEqual(w, g) {
			t.Errorf("%s: Hone %.200v, converter %.200v", k, g, w)
		}
	}
	for _, k := range got.Keys() {
		if !ref.Metadata.Has(k) {
			v, _ := got.Get(k)
			t.Errorf("%s = %.80v: the converter writes no such key", k, v)
		}
	}
}

// TestSPMGGUFExportEncodes: the exported SentencePiece metadata, read back by FromGGUF,
// tokenizes every golden string as sentencepiece does (llama.cpp's split of control tokens
// written in the text included).
func TestSPMGGUFExportEncodes(t *testing.T) {
	meta, err := GGUFMetadata(spmModelDir(t, 800), 800, vocabRules["llama"])
	if err != nil {
		t.Fatal(err)
	}
	tk, err := FromGGUF(writtenMeta(t, meta))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range readSPMGoldens(t) {
		if got := tk.Encode(g.Text, false); !slices.Equal(got, g.SPM) {
			t.Errorf("Encode(%q) = %v, want %v", g.Text, got, g.SPM)
		}
	}
}

// TestSPMGGUFVocabRules: the added-token rules of the converter (added_tokens.json,
// added_tokens_decoder, Phi-3's variant), padding to the model's embeddings, the Gemma and
// 49152-token rules, and the refusal without tokenizer.model.
func TestSPMGGUFVocabRules(t *testing.T) {
	dir := spmModelDir(t, 804)
	if err := os.WriteFile(filepath.Join(dir, "added_tokens.json"), []byte(`{"<extra>": 800}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tc, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	tc = []byte(strings.Replace(string(tc), `"added_tokens_decoder": {`,
		`"added_tokens_decoder": {"801": {"content": "a\u2581b", "special": false}, "802": {"content": "<unused0>", "special": false}, "803": {"content": "<|x|>", "special": false},`, 1))
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), tc, 0o644); err != nil {
		t.Fatal(err)
	}
	vocab := func(arch string) ([]string, []float32, []int32, *gguf.Metadata) {
		meta, err := GGUFMetadata(dir, 805, vocabRules[arch])
		if err != nil {
			t.Fatal(err)
		}
		md := writtenMeta(t, meta)
		tokens, _ := md.Strings("tokenizer.ggml.tokens")
		fs, _ := md.Floats("tokenizer.ggml.scores")
		ts, _ := md.Ints("tokenizer.ggml.token_type")
		scores, types := make([]float32, len(fs)), make([]int32, len(ts))
		for i := range fs {
			scores[i], types[i] = float32(fs[i]), int32(ts[i])
		}
		return tokens, scores, types, md
	}
	tokens, scores, types, md := vocab("llama")
	if len(tokens) != 805 || tokens[804] != "[PAD804]" || scores[804] != -10000 || types[804] != 5 {
		t.Fatalf("padding: %d tokens, last %q %v %v", len(tokens), tokens[804], scores[804], types[804])
	}
	for id, want := range map[int]struct {
		tok   string
		typ   int32
		score float32
	}{800: {"<extra>", 4, -1000}, 801: {"a b", 4, -1000}, 802: {"<unused0>", 3, -1000}, 803: {"<|x|>", 3, -1000}, 1: {"<s>", 3, -1000}} {
		if tokens[id] != want.tok || types[id] != want.typ || scores[id] != want.score {
			t.Errorf("token %d: %q type %d score %v, want %q type %d score %v", id, tokens[id], types[id], scores[id], want.tok, want.typ, want.score)
		}
	}
	if on, err := md.Bool("tokenizer.ggml.add_space_prefix"); err != nil || !on {
		t.Errorf("llama: add_space_prefix %v, %v (tokenizer_config.json's add_prefix_space)", on, err)
	}
	// Phi-3: added_tokens_decoder's entries keep their text, control only when special.
	tokens, _, types, _ = vocab("phi3")
	if tokens[801] != "a\u2581b" || types[801] != 4 || types[803] != 4 || types[1] != 3 {
		t.Errorf("phi3: %q type %d, %q type %d, <s> type %d", tokens[801], types[801], tokens[803], types[803], types[1])
	}
	_, _, _, md = vocab("gemma3")
	if on, err := md.Bool("tokenizer.ggml.add_space_prefix"); err != nil || on {
		t.Errorf("gemma3: add_space_prefix %v, %v; want false", on, err)
	}
	if err := os.Remove(filepath.Join(dir, "tokenizer.model")); err != nil {
		t.Fatal(err)
	}
	if _, err := GGUFMetadata(dir, 805, vocabRules["llama"]); err == nil || !strings.Contains(err.Error(), "tokenizer.model") {
		t.Fatalf("without tokenizer.model: %v", err)
	}
}

// FuzzParseSPMModel: the SentencePiece model parser never panics, and what it accepts has
// pieces of UTF-8 text and known types. Seeds: the test model, cut and flipped.
func FuzzParseSPMModel(f *testing.F) {
	b, err := os.ReadFile(filepath.Join(spmDir(), "tokenizer.model"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add(b[:len(b)/2])
	f.Add(b[:37])
	f.Add([]byte{0x0a, 0x05, 0x0a, 0x01, 'a', 0x18, 0x07})
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		pieces, err := parseSPMModel(b)
		if err != nil {
			return
		}
		for _, p := range pieces {
			if p.Type < spmNormal || p.Type > spmByte {
				t.Fatalf("piece type %d", p.Type)
			}
		}
	})
}

// TestGGUFPreO200kAndTekken: a byte-level tokenizer.json with GPT-4o's o200k split (Phi-4-mini)
// or Mistral NeMo's tekken split (with ignore_merges) exports as tokenizer.ggml.pre gpt-4o or
// tekken, and FromGGUF reads that back into a tokenizer that encodes the whole test corpus as
// the tokenizer.json does (whose ids equal Hugging Face tokenizers', TestVariantGoldens).
func TestGGUFPreO200kAndTekken(t *testing.T) {
	corpus := readCorpus(t)
	for _, v := range readVariants(t) {
		if v.Name != "gpt-4o" && v.Name != "tekken" {
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			var doc map[string]any
			if err := json.Unmarshal(variantJSON(t, v), &doc); err != nil {
				t.Fatal(err)
			}
			doc["model"].(map[string]any)["ignore_merges"] = v.Name == "tekken"
			raw, _ := json.Marshal(doc)
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), raw, 0o644); err != nil {
				t.Fatal(err)
			}
			want, err := FromJSON(raw, nil)
			if err != nil {
				t.Fatal(err)
			}
			meta, err := GGUFMetadata(dir, want.VocabSize(), vocabRules["qwen2"])
			if err != nil {
				t.Fatal(err)
			}
			md := writtenMeta(t, meta)
			if pre, _ := md.String("tokenizer.ggml.pre"); pre != v.Name {
				t.Fatalf("tokenizer.ggml.pre %q, want %q", pre, v.Name)
			}
			got, err := FromGGUF(md)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range corpus {
				if g, w := got.Encode(s, false), want.Encode(s, false); !slices.Equal(g, w) {
					t.Fatalf("%q: ids %v from the GGUF, %v from tokenizer.json", s, g, w)
				}
			}
		})
	}
}
