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
		`{"architectures":["FalconForCausalLM"],"hidden_size":8}`:                "FalconForCausalLM",
		`{"architectures":["Mistral3ForConditionalGeneration"],"hidden_size":8}`: "Mistral3ForConditionalGeneration",
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
	f.Add([]byte(smolLM2ConfigV5))
	f.Add([]byte(`{"architectures":["Qwen3ForCausalLM"],"hidden_size":16,"intermediate_size":8,"num_hidden_layers":2,"num_attention_heads":2,"vocab_size":9,"layer_types":["full_attention","sliding_attention"],"use_sliding_window":true,"sliding_window":4,"rope_parameters":{"full_attention":{"rope_type":"llama3","factor":2},"sliding_attention":{"rope_type":"llama3","factor":2}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		// A config that parses is one the model code can size buffers from.
		if c.RopeTheta <= 1 || c.MaxPositionEmbeddings <= 0 || (c.RopeScaling != nil && c.RopeScaling.Factor <= 0) {
			t.Fatalf("accepted unusable RoPE parameters: %+v", c)
		}
		if c.HiddenSize <= 0 || c.HeadDim <= 0 || c.HeadDim%2 != 0 || c.NumKVHeads <= 0 || c.NumHeads%c.NumKVHeads != 0 || c.VocabSize <= 0 {
			t.Fatalf("accepted an unusable config: %+v", c)
		}
	})
}

// SmolLM2-135M-Instruct's config.json as transformers 5 saves it: rope_theta lives in
// rope_parameters, and the dtype field is renamed.
const smolLM2ConfigV5 = `{
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 1, "dtype": "bfloat16", "eos_token_id": 2, "head_dim": 64, "hidden_act": "silu",
  "hidden_size": 576, "initializer_range": 0.041666666666666664, "intermediate_size": 1536,
  "is_llama_config": true, "max_position_embeddings": 8192, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3, "pad_token_id": 2,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05, "rope_interleaved": false,
  "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"},
  "tie_word_embeddings": true, "transformers_version": "5.0.0", "use_cache": true, "vocab_size": 49152}`

// Before rope_parameters was read, this config ran with rope_theta 10000.
func TestParseConfigTransformers5RopeParameters(t *testing.T) {
	c, err := ParseConfig([]byte(smolLM2ConfigV5))
	if err != nil {
		t.Fatal(err)
	}
	if c.RopeTheta != 100000 || c.RopeScaling != nil || c.TorchDType != "bfloat16" || c.RMSNormEps != 1e-5 {
		t.Fatalf("rope_theta %v scaling %+v dtype %q eps %v", c.RopeTheta, c.RopeScaling, c.TorchDType, c.RMSNormEps)
	}
	// Llama 3.2 in transformers 5's layout: the llama3 scaling and theta in one dictionary.
	c, err = ParseConfig([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":2048,"intermediate_size":8192,
		"num_hidden_layers":16,"num_attention_heads":32,"num_key_value_heads":8,"head_dim":64,"vocab_size":128256,
		"max_position_embeddings":131072,"rope_parameters":{"factor":32.0,"high_freq_factor":4.0,"low_freq_factor":1.0,
		"original_max_position_embeddings":8192,"rope_theta":500000.0,"rope_type":"llama3"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if rs := c.RopeScaling; c.RopeTheta != 500000 || rs == nil || rs.Kind() != "llama3" || rs.Factor != 32 ||
		rs.LowFreqFactor != 1 || rs.HighFreqFactor != 4 || rs.OriginalMaxPositionEmbeddings != 8192 {
		t.Fatalf("llama 3.2: theta %v scaling %+v", c.RopeTheta, c.RopeScaling)
	}
	// One dictionary per layer type (transformers 5 with layer_types), all alike.
	c, err = ParseConfig([]byte(`{"architectures":["Qwen3ForCausalLM"],"hidden_size":64,"intermediate_size":96,
		"num_hidden_layers":2,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":16,"vocab_size":300,
		"layer_types":["full_attention","full_attention"],"use_sliding_window":false,"sliding_window":null,
		"rope_parameters":{"full_attention":{"rope_theta":1000000.0,"rope_type":"default"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.RopeTheta != 1e6 || c.RopeScaling != nil {
		t.Fatalf("per-layer-type: theta %v scaling %+v", c.RopeTheta, c.RopeScaling)
	}
	// transformers 5's precedence: a rope_scaling dictionary wins over rope_parameters, and
	// the dictionary's rope_theta over the top-level one; a top-level
	// original_max_position_embeddings wins over the dictionary's.
	c, err = ParseConfig([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":96,
		"num_hidden_layers":1,"num_attention_heads":4,"vocab_size":300,"rope_theta":20000,"original_max_position_embeddings":64,
		"rope_parameters":{"rope_type":"default","rope_theta":30000},
		"rope_scaling":{"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":128,"rope_theta":40000}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.RopeTheta != 40000 || c.RopeScaling.Kind() != "llama3" || c.RopeScaling.OriginalMaxPositionEmbeddings != 64 {
		t.Fatalf("precedence: theta %v scaling %+v", c.RopeTheta, c.RopeScaling)
	}
	// The transformers 4 layout still works, and linear scaling through rope_parameters.
	c, err = ParseConfig([]byte(`{"architectures":["LlamaForCausalLM"],"hidden_size":64,"intermediate_size":96,
		"num_hidden_layers":1,"num_attention_heads":4,"vocab_size":300,"rope_theta":20000,"rope_scaling":null,
		"rope_parameters":{"type":"linear","factor":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.RopeTheta != 20000 || c.RopeScaling.Kind() != "linear" || c.RopeScaling.Factor != 2 {
		t.Fatalf("linear: theta %v scaling %+v", c.RopeTheta, c.RopeScaling)
	}
}

// Real Qwen2.5 configs carry sliding-window fields that are off; they load.
func TestParseConfigQwenWindowOffAndDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(`{"architectures":["Qwen2ForCausalLM"],"attention_dropout":0.0,"bos_token_id":151643,
		"eos_token_id":151645,"hidden_act":"silu","hidden_size":896,"initializer_range":0.02,"intermediate_size":4864,
		"max_position_embeddings":32768,"max_window_layers":21,"model_type":"qwen2","num_attention_heads":14,
		"num_hidden_layers":24,"num_key_value_heads":2,"rms_norm_eps":1e-06,"rope_theta":1000000.0,
		"sliding_window":32768,"tie_word_embeddings":true,"torch_dtype":"bfloat16","transformers_version":"4.43.1",
		"use_cache":true,"use_sliding_window":false,"vocab_size":151936,"mlp_bias":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.MLPBias || !c.AttentionBias || c.RopeTheta != 1e6 {
		t.Fatalf("qwen2.5: %+v", c)
	}
	// A window no shorter than max_position_embeddings never binds.
	if _, err := ParseConfig([]byte(`{"architectures":["Qwen2ForCausalLM"],"hidden_size":64,"intermediate_size":96,
		"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":300,"max_position_embeddings":4096,
		"use_sliding_window":true,"sliding_window":4096,"max_window_layers":0}`)); err != nil {
		t.Fatal(err)
	}
	// Defaults are each architecture's: Qwen3's head_dim is 128, Qwen's max_position_embeddings
	// 32768; no architectures list falls back on model_type; Qwen3 reads attention_bias.
	c, err = ParseConfig([]byte(`{"model_type":"qwen3","hidden_size":64,"intermediate_size":96,"num_hidden_layers":1,
		"num_attention_heads":4,"vocab_size":300,"attention_bias":true}`))
	if err != nil {
		t.Fatal(err)
	}
	if c.Arch != "qwen3" || c.HeadDim != 128 || c.MaxPositionEmbeddings != 32768 || !c.AttentionBias || c.RopeTheta != 10000 {
		t.Fatalf("qwen3 defaults: %+v", c)
	}
}

// Fields that change the computation and that Hone does not implement are refused, by name.
func TestParseConfigRefusesUnimplementedMath(t *testing.T) {
	base := `"hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":300`
	for cfg, want := range map[string]string{
		`{"architectures":["LlamaForCausalLM"],` + base + `,"rope_parameters":{"rope_type":"yarn","factor":4,"rope_theta":1e6}}`:                                                                                  `rope_parameters rope_type "yarn"`,
		`{"architectures":["LlamaForCausalLM"],` + base + `,"rope_parameters":{"rope_type":"dynamic","factor":2}}`:                                                                                                `"dynamic"`,
		`{"architectures":["Qwen2ForCausalLM"],` + base + `,"rope_scaling":{"type":"longrope","factor":2}}`:                                                                                                       `rope_scaling rope_type "longrope"`,
		`{"architectures":["LlamaForCausalLM"],` + base + `,"partial_rotary_factor":0.5}`:                                                                                                                         "partial_rotary_factor 0.5",
		`{"architectures":["LlamaForCausalLM"],` + base + `,"rope_parameters":{"rope_type":"default","partial_rotary_factor":0.25}}`:                                                                              "rope_parameters.partial_rotary_factor 0.25",
		`{"architectures":["Qwen2ForCausalLM"],` + base + `,"use_sliding_window":true,"sliding_window":512,"max_window_layers":1}`:                                                                                "sliding_window 512",
		`{"architectures":["Qwen3ForCausalLM"],` + base + `,"use_sliding_window":true,"sliding_window":512,"layer_types":["sliding_attention","full_attention"]}`:                                                 "sliding_window 512",
		`{"architectures":["Qwen3ForCausalLM"],` + base + `,"layer_types":["full_attention","linear_attention"]}`:                                                                                                 "linear_attention",
		`{"architectures":["Qwen3ForCausalLM"],` + base + `,"layer_types":["full_attention"]}`:                                                                                                                    "layer_types has 1 entries",
		`{"architectures":["Qwen3ForCausalLM"],` + base + `,"layer_types":["full_attention","sliding_attention"],"rope_parameters":{"full_attention":{"rope_theta":1e6},"sliding_attention":{"rope_theta":1e4}}}`: "differ between layer types",
		`{"architectures":["LlamaForCausalLM"],` + base + `,"quantization_config":{"quant_method":"awq","bits":4}}`:                                                                                               "quantization_config",
		`{"architectures":["Qwen3ForCausalLM"],` + base + `,"rope_parameters":{"full_attention":{"rope_theta":1e6}}}`:                                                                                             "rope_parameters.full_attention is a dictionary",
		`{"architectures":["LlamaForCausalLM"],` + base + `,"hidden_act":"gelu_pytorch_tanh"}`:                                                                                                                    "hidden_act",
		`{"architectures":["LlamaForCausalLM"],` + base + `,"rope_theta":0.5}`:                                                                                                                                    "rope_theta",
		`{"architectures":["LlamaForCausalLM"],` + base + `,"rope_parameters":{"rope_type":"llama3","factor":8,"low_freq_factor":1,"high_freq_factor":4,"original_max_position_embeddings":1.5}}`:                 "original_max_position_embeddings",
	} {
		_, err := ParseConfig([]byte(cfg))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want it to mention %q", cfg, err, want)
		}
	}
}
