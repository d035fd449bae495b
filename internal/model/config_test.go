package model

import (
	"errors"
	"strings"
	"testing"
)

const llama31Config = `{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "bos_token_id": 128000,
  "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu", "hidden_size": 4096,
  "intermediate_size": 14336, "max_position_embeddings": 131072, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "rms_norm_eps": 1e-05, "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0,
  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16", "vocab_size": 128256}`

func TestParseConfigLlama31(t *testing.T) {
	c, err := ParseConfig([]byte(llama31Config))
	if err != nil {
		t.Fatal(err)
	}
	if c.Arch != "llama" || c.HeadDim != 128 || c.NumKVHeads != 8 || c.QDim() != 4096 || c.KVDim() != 1024 {
		t.Fatalf("%+v", c)
	}
	if c.RopeScaling.Kind() != "llama3" || c.RopeScaling.OriginalMaxPositionEmbeddings != 8192 {
		t.Fatalf("rope scaling %+v", c.RopeScaling)
	}
	if len(c.EOSIDs()) != 3 || c.BOSTokenID[0] != 128000 {
		t.Fatalf("eos %v bos %v", c.EOSIDs(), c.BOSTokenID)
	}
}

func TestParseConfigQwen(t *testing.T) {
	c, err := ParseConfig([]byte(`{"architectures":["Qwen2ForCausalLM"],"hidden_size":896,"intermediate_size":4864,
		"num_hidden_layers":24,"num_attention_heads":14,"num_key_value_heads":2,"vocab_size":151936,"tie_word_embeddings":true,
		"rope_theta":1000000.0,"rms_norm_eps":1e-06,"eos_token_id":151643}`))
	if err != nil {
		t.Fatal(err)
	}
	if !c.AttentionBias || c.QKNorm || c.HeadDim != 64 || !c.TieWordEmbeddings {
		t.Fatalf("qwen2: %+v", c)
	}
	c, err = ParseConfig([]byte(`{"architectures":["Qwen3ForCausalLM"],"hidden_size":1024,"intermediate_size":3072,
		"num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8,"head_dim":128,"vocab_size":151936}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.AttentionBias || !c.QKNorm || c.HeadDim != 128 || c.QDim() != 2048 {
		t.Fatalf("qwen3: %+v", c)
	}
	g, err := ParseGenerationConfig([]byte(`{"eos_token_id":[151645,151643],"temperature":0.7,"top_k":20,"do_sample":true}`))
	if err != nil || *g.Temperature != 0.7 || *g.TopK != 20 || len(g.EOSTokenID) != 2 || g.TopP != nil {
		t.Fatalf("generation config %+v %v", g, err)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for cfg, want := range map[string]string{
		`{"architectures":["MistralForCausalLM"],"hidden_size":8}`: "MistralForCausalLM",
		`{"model_type":"gpt2"}`: "gpt2",
		`{}`:                    "(none given)",
		`{"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":3,"num_key_value_heads":2,"vocab_size":9}`:                       "multiple",
		`{"architectures":["LlamaForCausalLM"],"hidden_size":0,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":1,"vocab_size":9}`:                                                "hidden_size",
		`{"architectures":["LlamaForCausalLM"],"hidden_size":8,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":1,"vocab_size":9,"hidden_act":"gelu"}`:                            "gelu",
		`{"architectures":["LlamaForCausalLM"],"hidden_size":8,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":1,"vocab_size":9,"rope_scaling":{"rope_type":"yarn","factor":4}}`: "yarn",
		`[1]`: "config.json",
	} {
		_, err := ParseConfig([]byte(cfg))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %q", cfg, err, want)
		}
	}
	_, err := ParseConfig([]byte(`{"architectures":["GPTNeoXForCausalLM"]}`))
	if !errors.Is(err, ErrUnsupported) {
		t.Fatalf("not ErrUnsupported: %v", err)
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(llama31Config))
	f.Add([]byte(`{"architectures":["Qwen3ForCausalLM"],"hidden_size":16,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":2,"head_dim":8,"vocab_size":9}`))
	f.Add([]byte(`{"architectures":["LlamaForCausalLM"],"rope_scaling":{"type":"linear","factor":-1}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		// A config that parses is one the model code can size buffers from.
		if c.HiddenSize <= 0 || c.HeadDim <= 0 || c.HeadDim%2 != 0 || c.NumKVHeads <= 0 || c.NumHeads%c.NumKVHeads != 0 || c.VocabSize <= 0 {
			t.Fatalf("accepted an unusable config: %+v", c)
		}
	})
}
