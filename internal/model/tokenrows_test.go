package model_test

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/safetensors"
)

// writeTokenAdapter writes a PEFT adapter directory with one LoRA pair (layer 0 q_proj, B
// zero), the given token-row tensors and trainable_token_indices (raw JSON).
func writeTokenAdapter(t *testing.T, m *model.Model, indices string, rows map[string][]int) string {
	t.Helper()
	dir := t.TempDir()
	H := m.Config.HiddenSize
	_, in, _ := model.ModuleShape(&m.Config, "q_proj")
	out, _, _ := model.ModuleShape(&m.Config, "q_proj")
	ts := []safetensors.Tensor{
		safetensors.FromF32("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight", []int{2, in}, make([]float32, 2*in)),
		safetensors.FromF32("base_model.model.model.layers.0.self_attn.q_proj.lora_B.weight", []int{out, 2}, make([]float32, out*2)),
	}
	for name, shape := range rows {
		v := make([]float32, shape[0]*shape[1])
		for i := range v {
			v[i] = float32(i%H) * 0.01
		}
		ts = append(ts, safetensors.FromF32(name, shape, v))
	}
	if err := safetensors.Write(filepath.Join(dir, "adapter_model.safetensors"), ts, nil); err != nil {
		t.Fatal(err)
	}
	cfg := `{"peft_type":"LORA","r":2,"lora_alpha":4,"target_modules":["q_proj"],"trainable_token_indices":` + indices + `}`
	if err := safetensors.WriteFileAtomic(filepath.Join(dir, "adapter_config.json"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestLoadLoRATokenRows reads trainable token rows as PEFT writes them: a list of ids (the
// embedding's; an LM head tied to it shares them) or ids by module (embed_tokens, lm_head),
// each module's rows in its token_adapter.trainable_tokens_delta; what does not fit the model
// or the config is refused by name.
func TestLoadLoRATokenRows(t *testing.T) {
	untied, tied := load(t, "llama"), load(t, "llama-tied-rope3")
	H := untied.Config.HiddenSize
	emb, head := model.PeftEmbedTokens, model.PeftHeadTokens
	a, err := model.LoadLoRA(writeTokenAdapter(t, untied, `[3, 9]`, map[string][]int{emb: {2, H}}), &untied.Config)
	if err != nil || a.EmbedTokens == nil || a.HeadTokens != nil || !slices.Equal(a.EmbedTokens.IDs, []int{3, 9}) {
		t.Fatalf("a list, untied: %v %+v", err, a)
	}
	if r := a.EmbedTokens.Row(9); r == nil || r[1] != 0.01 || a.EmbedTokens.Row(4) != nil {
		t.Fatal("Row")
	}
	a, err = model.LoadLoRA(writeTokenAdapter(t, untied, `{"model.embed_tokens": [3], "lm_head": [3, 5, 7]}`,
		map[string][]int{emb: {1, H}, head: {3, H}}), &untied.Config)
	if err != nil || a.TiedTokens() || len(a.EmbedTokens.IDs) != 1 || len(a.HeadTokens.IDs) != 3 {
		t.Fatalf("by module, untied: %v", err)
	}
	a, err = model.LoadLoRA(writeTokenAdapter(t, tied, `{"embed_tokens": [1, 2]}`, map[string][]int{emb: {2, H}}), &tied.Config)
	if err != nil || !a.TiedTokens() {
		t.Fatalf("tied: %v", err)
	}
	for _, c := range []struct {
		m       *model.Model
		indices string
		rows    map[string][]int
		want    string
	}{
		{tied, `{"embed_tokens": [1], "lm_head": [1]}`, map[string][]int{emb: {1, H}, head: {1, H}}, "lm_head, which is the embedding"},
		{untied, `{"wte": [1]}`, map[string][]int{emb: {1, H}}, `names "wte"`},
		{untied, `null`, map[string][]int{emb: {1, H}}, "not named by adapter_config.json"},
		{untied, `[1, 2]`, nil, "has no tensor"},
		{untied, `[1, 2]`, map[string][]int{emb: {3, H}}, "shape"},
		{untied, `[1, 100000]`, map[string][]int{emb: {2, H}}, "outside the vocabulary"},
		{untied, `[4, 4]`, map[string][]int{emb: {2, H}}, "twice"},
		{untied, `"x"`, nil, "trainable_token_indices"},
	} {
		if _, err := model.LoadLoRA(writeTokenAdapter(t, c.m, c.indices, c.rows), &c.m.Config); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error with %q", c.indices, err, c.want)
		}
	}
}
