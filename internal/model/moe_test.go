package model_test

import (
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/synth"
)

// moeGoldenVariants are the synthetic models of scripts/model-goldens/qwen3moe.sh (keep in
// step): the tiny preset (8 experts, top 2, normalised), and a mixed one (3 layers, layer 1
// dense, 6 experts, top 3, norm_topk_prob false), with and without a LoRA adapter.
var moeGoldenVariants = map[string]func() synth.Options{
	"qwen3moe":            func() synth.Options { return synth.Tiny("qwen3moe") },
	"qwen3moe-mixed":      moeMixed,
	"qwen3moe-mixed-lora": moeMixed,
}

func moeMixed() synth.Options {
	o := synth.Tiny("qwen3moe")
	o.Layers, o.Experts, o.ExpertsPerTok, o.DenseTopK, o.MLPOnlyLayers = 3, 6, 3, true, []int{1}
	return o
}

func readMoEGolden(t *testing.T, variant string) golden {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "goldens-qwen3moe", variant+".json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.NewDecoder(zr).Decode(&g); err != nil {
		t.Fatal(err)
	}
	return g
}

func writeMoE(t testing.TB, o synth.Options, wantSHA string) string {
	t.Helper()
	dir := t.TempDir()
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	if wantSHA != "" {
		data, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != wantSHA {
			t.Fatalf("synth wrote other weights than the goldens were made from (%s vs %s): rerun scripts/model-goldens/qwen3moe.sh", got, wantSHA)
		}
	}
	return dir
}

// TestQwen3MoELogitsMatchTransformers: prefill and decode logits of Qwen3-MoE models equal
// transformers' (float64, eager experts; peft for the adapter) on the same synthetic weights.
func TestQwen3MoELogitsMatchTransformers(t *testing.T) {
	for variant, opts := range moeGoldenVariants {
		t.Run(variant, func(t *testing.T) {
			g := readMoEGolden(t, variant)
			o := opts()
			o.Std = 0.08
			dir := writeMoE(t, o, g.WeightsSHA256)
			m, err := model.Load(dir, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			checkGoldenLogits(t, m, g, filepath.Join("testdata", "goldens-qwen3moe"), 8, 25, 1e-5)
		})
	}
}

// TestQwen3MoEGreedyDecode: greedy decoding over the paged cache picks the tokens that
// recomputing the whole sequence picks, with the same logits, and a batch that mixes a
// prefill with a decode step (experts grouped across both) gives each its own logits.
func TestQwen3MoEGreedyDecode(t *testing.T) {
	o := moeMixed()
	o.Std = 0.3
	m, err := model.Load(writeMoE(t, o, ""), model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	prompt := []int{3, 77, 190, 45, 8, 300, 12}
	toks, logits := greedy(t, m, prompt, 12)
	seen := map[int]bool{}
	for _, id := range toks {
		seen[id] = true
	}
	if len(seen) < 2 {
		t.Fatalf("greedy tokens %v: a degenerate model tests little", toks)
	}
	full := append([]int(nil), prompt...)
	for i, id := range toks {
		want := lastLogits(t, m, full)
		if e := relErrF(logits[i], want); e > 1e-5 {
			t.Fatalf("step %d: decode logits differ from a full recompute by %.3g", i, e)
		}
		if argmax(want) != id {
			t.Fatalf("step %d: decode picked %d, a full recompute %d", i, id, argmax(want))
		}
		full = append(full, id)
	}
	// A batch of a prefill and a decode step.
	cache := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 16})
	a, b := cache.NewSequence(), cache.NewSequence()
	if _, err := m.Forward([]model.Step{{Seq: a, Tokens: prompt}}); err != nil {
		t.Fatal(err)
	}
	out, err := m.Forward([]model.Step{{Seq: a, Tokens: toks[:1], LogitsAt: []int{0}}, {Seq: b, Tokens: prompt[:5], LogitsAt: []int{4}}})
	if err != nil {
		t.Fatal(err)
	}
	if e := relErrF(out[0][0], logits[1]); e > 1e-5 {
		t.Fatalf("batched decode step differs by %.3g", e)
	}
	if e := relErrF(out[1][0], lastLogits(t, m, prompt[:5])); e > 1e-5 {
		t.Fatalf("batched prefill differs by %.3g", e)
	}
	t.Logf("greedy %v", toks)
}

func relErrF(a, b []float32) float64 {
	w := make([]float64, len(b))
	for i, v := range b {
		w[i] = float64(v)
	}
	return relErr(a, w)
}

// moeGGUF writes o as a directory and as a GGUF in llama.cpp's qwen3moe layout: the router
// as ffn_gate_inp, each layer's experts merged into 3-D ffn_{gate,up,down}_exps tensors
// (ggml dims cols × rows × experts), typed by typ (F32, Q8_0 or Q4_K); with allMatrices the
// other matrices too (attention, embedding, head).
func moeGGUF(t testing.TB, o synth.Options, typ gguf.TensorType, allMatrices bool) (dir, path string) {
	t.Helper()
	src := writeMoE(t, o, "")
	f, err := safetensors.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := model.LoadConfig(src)
	if err != nil {
		t.Fatal(err)
	}
	mc := cfg.MoE
	get := func(name string) []float32 {
		tn, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("no tensor %s", name)
		}
		v, err := tn.F32()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	encode := func(v []float32) []byte {
		switch typ {
		case gguf.Q8_0:
			return quantQ8_0(v)
		case gguf.Q4_K:
			return quantQ4_K(v)
		}
		return f32Bytes(v)
	}
	return synthGGUF(t, o, func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
		a := cfg.Arch + "."
		meta = append(meta, gguf.KV{Key: a + "expert_count", Value: uint32(mc.NumExperts)},
			gguf.KV{Key: a + "expert_used_count", Value: uint32(mc.TopK)},
			gguf.KV{Key: a + "expert_feed_forward_length", Value: uint32(mc.Intermediate)})
		var keep []gguf.TensorData
		for _, tt := range ts {
			if strings.Contains(tt.Name, "..") { // the expert and router names synthGGUF cannot map
				continue
			}
			if allMatrices && len(tt.Dims) == 2 {
				v, err := gguf.Dequantize(gguf.F32, tt.Data, len(tt.Data)/4)
				if err != nil {
					t.Fatal(err)
				}
				tt.Data, tt.Type = encode(v), typ
			}
			keep = append(keep, tt)
		}
		for l := 0; l < cfg.NumLayers; l++ {
			if !cfg.SparseLayer(l) {
				continue
			}
			p := fmt.Sprintf("model.layers.%d.mlp.", l)
			keep = append(keep, gguf.TensorData{Name: fmt.Sprintf("blk.%d.ffn_gate_inp.weight", l),
				Dims: []uint64{uint64(cfg.HiddenSize), uint64(mc.NumExperts)}, Type: gguf.F32, Data: f32Bytes(get(p + "gate.weight"))})
			for _, part := range []struct {
				hf, gg     string
				rows, cols int
			}{{"gate_proj", "ffn_gate_exps", mc.Intermediate, cfg.HiddenSize}, {"up_proj", "ffn_up_exps", mc.Intermediate, cfg.HiddenSize},
				{"down_proj", "ffn_down_exps", cfg.HiddenSize, mc.Intermediate}} {
				var all []float32
				for e := 0; e < mc.NumExperts; e++ {
					all = append(all, get(fmt.Sprintf("%sexperts.%d.%s.weight", p, e, part.hf))...)
				}
				keep = append(keep, gguf.TensorData{Name: fmt.Sprintf("blk.%d.%s.weight", l, part.gg),
					Dims: []uint64{uint64(part.cols), uint64(part.rows), uint64(mc.NumExperts)}, Type: typ, Data: encode(all)})
			}
		}
		return meta, keep
	})
}

// TestQwen3MoEGGUFMatchesDirectory: a synthetic Qwen3-MoE written as a GGUF in llama.cpp's
// layout (merged 3-D expert tensors, f32) loads with the directory's config and logits; with
// Q8_0 experts (per-expert views of the quantized tensor) the logits stay within the
// activation quantization's error of the dequantized load's, with the same greedy tokens.
func TestQwen3MoEGGUFMatchesDirectory(t *testing.T) {
	o := synth.Tiny("qwen3moe")
	o.Std = 0.3
	dir, path := moeGGUF(t, o, gguf.F32, false)
	md, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mg, err := model.Load(path, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mg.Config.MoE == nil || fmt.Sprint(*mg.Config.MoE) != fmt.Sprint(*md.Config.MoE) {
		t.Fatalf("GGUF MoE config %+v, directory %+v", mg.Config.MoE, md.Config.MoE)
	}
	prompt := []int{5, 100, 23, 400, 7, 61, 2, 250}
	if e := relErrF(lastLogits(t, mg, prompt), lastLogits(t, md, prompt)); e > 1e-5 {
		t.Fatalf("GGUF logits differ from the directory's by %.3g", e)
	}
	_, qpath := moeGGUF(t, o, gguf.Q8_0, false)
	mq, err := model.Load(qpath, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if q := mq.Layers[0].MoE.Experts[3].Down.W.Q; q == nil || q.Type != gguf.Q8_0 {
		t.Fatalf("expert weights not kept quantized")
	}
	mf, err := model.Load(qpath, model.LoadOptions{DType: model.DTypeF32})
	if err != nil {
		t.Fatal(err)
	}
	compareGreedy(t, mq, mf, 0.05)
}

// TestQwen3MoEConfig: the expert fields are read with transformers' defaults and the dense
// layers placed as Qwen3MoeDecoderLayer places them; what Hone does not compute is refused by
// name.
func TestQwen3MoEConfig(t *testing.T) {
	base := `"architectures":["Qwen3MoeForCausalLM"],"hidden_size":64,"intermediate_size":128,"num_hidden_layers":4,
	"num_attention_heads":4,"num_key_value_heads":2,"vocab_size":512`
	c, err := model.ParseConfig([]byte(`{` + base + `,"num_experts":8,"decoder_sparse_step":2,"mlp_only_layers":[3]}`))
	if err != nil {
		t.Fatal(err)
	}
	mc := c.MoE
	if mc.NumExperts != 8 || mc.TopK != 8 || mc.Intermediate != 768 || mc.NormTopK || fmt.Sprint(mc.Sparse) != "[false true false false]" || c.HeadDim != 16 || !c.QKNorm {
		t.Fatalf("config %+v, moe %+v", c, mc)
	}
	if !c.HasModule(0, "gate_proj") || c.HasModule(1, "up_proj") || !c.HasModule(1, "q_proj") {
		t.Fatal("HasModule")
	}
	for _, tc := range []struct{ extra, want string }{
		{`"num_experts":4,"num_experts_per_tok":5`, "num_experts_per_tok 5"},
		{`"decoder_sparse_step":0`, "decoder_sparse_step"},
		{`"moe_intermediate_size":0`, "moe_intermediate_size"},
		{`"use_sliding_window":true,"sliding_window":128`, "sliding_window 128"},
		{`"num_experts":4,"num_local_experts":6`, "num_local_experts"},
		{`"norm_topk_prob":"yes"`, "norm_topk_prob"},
	} {
		_, err := model.ParseConfig([]byte(`{` + base + `,` + tc.extra + `}`))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %q", tc.extra, err, tc.want)
		}
	}
	// llama.cpp's qwen3moe always normalises: a config that does not has no GGUF form.
	if _, _, err := model.GGUFMetadata(c); err == nil || !strings.Contains(err.Error(), "norm_topk_prob") {
		t.Errorf("GGUF metadata of norm_topk_prob false: %v", err)
	}
}
