package serving

import (
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/export"
	"github.com/honeai/hone/internal/synth"
)

// familyCase is a base model of one chat family: its files name only the end of sequence (no
// chat template, no generation_config.json, no end-of-turn id).
type familyCase struct {
	name, arch string
	fam        string // synth.Families key, or "" with real set
	real       string // a real tokenizer of internal/tokenizer/testdata
	eos, eot   string // real: the plain end of sequence and the end of turn
	builtin    string
}

var familyCases = []familyCase{
	{name: "gemma3", arch: "gemma3", fam: "gemma", builtin: chattemplate.BuiltinGemma},
	{name: "gemma2", arch: "gemma2", fam: "gemma", builtin: chattemplate.BuiltinGemma},
	{name: "phi3", arch: "phi3", fam: "phi3", builtin: chattemplate.BuiltinPhi3},
	{name: "mistral", arch: "mistral", fam: "mistral", builtin: chattemplate.BuiltinMistral},
	{name: "llama2", arch: "llama", fam: "mistral", builtin: chattemplate.BuiltinMistral},
	{name: "llama3-synth", arch: "llama", fam: "llama3", builtin: chattemplate.BuiltinLlama3},
	{name: "qwen2-synth", arch: "qwen2", fam: "chatml", builtin: chattemplate.BuiltinChatML},
	{name: "qwen3moe", arch: "qwen3moe", fam: "chatml", builtin: chattemplate.BuiltinQwen3},
	{name: "llama3", arch: "llama", real: "llama3", eos: "<|end_of_text|>", eot: "<|eot_id|>", builtin: chattemplate.BuiltinLlama3},
	{name: "qwen3", arch: "qwen3", real: "qwen3", eos: "<|endoftext|>", eot: "<|im_end|>", builtin: chattemplate.BuiltinQwen3},
	{name: "qwen2", arch: "qwen2", real: "qwen3", eos: "<|endoftext|>", eot: "<|im_end|>", builtin: chattemplate.BuiltinChatML},
	{name: "smollm2", arch: "llama", real: "smollm2", eos: "<|endoftext|>", eot: "<|im_end|>", builtin: chattemplate.BuiltinChatML},
}

// writeFamily writes the case's model directory and returns its end-of-turn id.
func writeFamily(t *testing.T, dir string, c familyCase) int {
	t.Helper()
	o := synth.Tiny(c.arch)
	o.Tied = true
	// Shapes that have a GGUF form (llama.cpp's): Gemma 3's one sliding layer of six, Gemma's
	// queries scaled by head_dim.
	switch c.arch {
	case "gemma3":
		o.Layers, o.RopeTheta = 1, 100000 // the local base, a tenth of it, is llama.cpp's 10000
		o.QueryPreAttnScalar = float64(o.HeadDim)
	case "gemma2":
		o.QueryPreAttnScalar = float64(o.HeadDim)
	}
	if c.fam != "" {
		eot, err := synth.WriteFamily(dir, o, synth.Families[c.fam])
		if err != nil {
			t.Fatal(err)
		}
		return eot
	}
	// A real tokenizer: its tokenizer.json, its tokenizer_config.json without the chat
	// template and with the plain end of sequence, config.json's ids to match.
	src := filepath.Join("..", "tokenizer", "testdata", c.real)
	f, err := os.Open(filepath.Join(src, "tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tj, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Model struct {
			Vocab map[string]int `json:"vocab"`
		} `json:"model"`
		Added []struct {
			ID      int    `json:"id"`
			Content string `json:"content"`
		} `json:"added_tokens"`
	}
	if err := json.Unmarshal(tj, &doc); err != nil {
		t.Fatal(err)
	}
	ids := map[string]int{}
	n := len(doc.Model.Vocab)
	for _, a := range doc.Added {
		ids[a.Content] = a.ID
		n = max(n, a.ID+1)
	}
	o.Hidden, o.Intermediate, o.Vocab = 32, 64, n
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	var tc map[string]any
	b, err := os.ReadFile(filepath.Join(src, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &tc); err != nil {
		t.Fatal(err)
	}
	delete(tc, "chat_template")
	tc["eos_token"] = c.eos
	var cfg map[string]any
	b, _ = os.ReadFile(filepath.Join(dir, "config.json"))
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["eos_token_id"] = ids[c.eos]
	cfg["bos_token_id"] = ids[c.eos]
	for name, v := range map[string]any{"tokenizer_config.json": tc, "config.json": cfg} {
		b, _ := json.Marshal(v)
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), tj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "generation_config.json")); err != nil {
		t.Fatal(err)
	}
	return ids[c.eot]
}

// TestBaseModelEveryFamily: for every family Hone serves, a base model whose files carry no
// chat template and name only the end of sequence (an HF directory, and the GGUF written from
// it, which has no tokenizer.ggml.eot_token_id) is served with its family's built-in template,
// and its end-of-turn token (recognised by its text) ends generation.
func TestBaseModelEveryFamily(t *testing.T) {
	for _, c := range familyCases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "hf")
			eot := writeFamily(t, dir, c)
			paths := []string{dir}
			// Hone's export writes no Qwen3-MoE GGUF, and a Mistral GGUF is a llama one.
			if c.arch != "mistral" && c.arch != "qwen3moe" {
				gg := filepath.Join(t.TempDir(), "m.gguf")
				if err := export.WriteGGUF(gg, dir, nil, "f16", c.name); err != nil {
					t.Fatal(err)
				}
				paths = append(paths, gg)
			}
			for _, path := range paths {
				s, err := Load(c.name, path, LoadOptions{NoEngine: true}, 0)
				if err != nil {
					t.Fatalf("%s: %v", path, err)
				}
				if want := "built-in " + c.builtin + " "; !strings.HasPrefix(s.TemplateFrom, want) {
					t.Errorf("%s: template from %q, want %q", path, s.TemplateFrom, want)
				}
				want, _ := chattemplate.Builtin(c.builtin)
				if s.Template.Source() != want {
					t.Errorf("%s: not the built-in %s template", path, c.builtin)
				}
				if !slices.Contains(s.EOS, eot) || !slices.Contains(s.StopIDs(), eot) {
					t.Errorf("%s: stop ids %v lack the end of turn %d (%s)", path, s.EOS, eot, s.Tok.TokenString(eot))
				}
				if eos, ok := s.Tok.EOS(); !ok || !slices.Contains(s.EOS, eos) {
					t.Errorf("%s: stop ids %v lack the eos %d", path, s.EOS, eos)
				}
				s.Close()
			}
		})
	}
}

// TestStopIDs: generation_config.json's eos_token_id list is kept; <|endoftext|> ends
// generation only where the template writes it (or it is the eos); a template given at load
// replaces the model's own; a model for which no built-in template fits is refused.
func TestStopIDs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(dir, synth.Tiny("qwen2")); err != nil {
		t.Fatal(err)
	}
	// synth writes generation_config.json's eos_token_id as [<|im_end|>, <|endoftext|>]
	// and config.json's as <|im_end|>.
	s, err := Load("s", dir, LoadOptions{NoEngine: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := s.Tok.TokenID("<|endoftext|>")
	imEnd, _ := s.Tok.TokenID("<|im_end|>")
	if !slices.Contains(s.EOS, end) || !slices.Contains(s.EOS, imEnd) || s.TemplateFrom != "tokenizer_config.json" {
		t.Fatalf("stop ids %v (want %d and %d), template from %q", s.EOS, end, imEnd, s.TemplateFrom)
	}
	s.Close()
	os.Remove(filepath.Join(dir, "generation_config.json"))
	s, err = Load("s", dir, LoadOptions{NoEngine: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(s.EOS, end) || !slices.Contains(s.EOS, imEnd) {
		t.Fatalf("without generation_config.json, stop ids %v (want %d, not %d)", s.EOS, imEnd, end)
	}
	s.Close()
	tpl := `{% for m in messages %}{{ m.content }}<|endoftext|>{% endfor %}`
	s, err = Load("s", dir, LoadOptions{NoEngine: true, ChatTemplate: tpl, ChatTemplateFrom: "--chat-template x.jinja"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(s.EOS, end) || s.Template.Source() != tpl || s.TemplateFrom != "--chat-template x.jinja" {
		t.Fatalf("a template writing <|endoftext|>: stop ids %v, template from %q", s.EOS, s.TemplateFrom)
	}
	s.Close()
	if _, err := Load("s", dir, LoadOptions{NoEngine: true, ChatTemplate: "{% if %}"}, 0); err == nil {
		t.Fatal("a template that does not compile was accepted")
	}

	bare := filepath.Join(t.TempDir(), "bare")
	if _, err := synth.WriteFamily(bare, synth.Tiny("llama"), synth.Family{Special: []string{"<|endoftext|>"}, BOS: "<|endoftext|>", EOS: "<|endoftext|>", EndOfTurn: "<|endoftext|>"}); err != nil {
		t.Fatal(err)
	}
	if _, err := Load("bare", bare, LoadOptions{NoEngine: true}, 0); !errors.Is(err, ErrNoChatTemplate) || !strings.Contains(err.Error(), `"llama"`) {
		t.Fatalf("no template and no built-in: %v", err)
	}
	s, err = Load("bare", bare, LoadOptions{NoEngine: true, ChatTemplate: tpl}, 0)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

// TestRealGemma3Stops: the published Gemma 3 270M GGUF (no chat template, no
// tokenizer.ggml.eot_token_id) gets the built-in Gemma template and stops at <end_of_turn>.
func TestRealGemma3Stops(t *testing.T) {
	path := os.Getenv("HONE_GEMMA3_GGUF")
	if path == "" {
		t.Skip("HONE_GEMMA3_GGUF is not set (scripts/test-setup.sh)")
	}
	s, err := Load("gemma", path, LoadOptions{NoEngine: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !strings.HasPrefix(s.TemplateFrom, "built-in gemma") || !slices.Equal(s.EOS, []int{1, 106}) {
		t.Fatalf("template from %q, stop ids %v (want [1 106])", s.TemplateFrom, s.EOS)
	}
}
