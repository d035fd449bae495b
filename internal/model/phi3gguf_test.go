package model_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/tokenizer"
)

// phi3GGUFModels are the synthetic Phi-3 shapes of the GGUF tests: Phi-3 (whole-head RoPE,
// LongRoPE, untied), Phi-4-mini (3/4 of each head rotated, tied, a sliding window of 16; the
// model of testdata/phi3-llamacpp-layout.json) and Phi-3 without RoPE scaling.
func phi3GGUFModels() map[string]synth.Options {
	phi3 := synth.Tiny("phi3")
	phi4 := synth.Tiny("phi3")
	phi4.PartialRotary, phi4.Tied, phi4.SlidingWindow = 0.75, true, 16
	plain := synth.Tiny("phi3")
	plain.RopeScaling = "none"
	out := map[string]synth.Options{"phi3": phi3, "phi4mini": phi4, "plain": plain}
	for k, o := range out {
		o.Std = 0.08
		out[k] = o
	}
	return out
}

// phi3GGUF writes o as a directory and as a GGUF file as Hone's export writes it: the phi3
// metadata and vectors of model.GGUFMetadata, the fused attn_qkv and ffn_up tensors, matrices
// typed typ (F32 or Q8_0).
func phi3GGUF(t *testing.T, o synth.Options, typ gguf.TensorType) (dir, path string) {
	t.Helper()
	cdir := t.TempDir()
	if err := synth.Write(cdir, o); err != nil {
		t.Fatal(err)
	}
	cfg, err := model.LoadConfig(cdir)
	if err != nil {
		t.Fatal(err)
	}
	saved := maps.Clone(hfToGGUF)
	defer func() { hfToGGUF = saved }()
	hfToGGUF["self_attn.qkv_proj"], hfToGGUF["mlp.gate_up_proj"] = "attn_qkv", "ffn_up"
	return synthGGUF(t, o, func(meta []gguf.KV, ts []gguf.TensorData) ([]gguf.KV, []gguf.TensorData) {
		arch, vectors, err := model.GGUFMetadata(cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range meta {
			if !strings.HasPrefix(kv.Key, "phi3.") && kv.Key != "general.architecture" {
				arch = append(arch, kv)
			}
		}
		for _, v := range vectors {
			ts = append(ts, gguf.TensorData{Name: v.Name, Dims: []uint64{uint64(len(v.Values))}, Type: gguf.F32, Data: f32Bytes(v.Values)})
		}
		for i := range ts {
			if typ == gguf.Q8_0 && len(ts[i].Dims) == 2 {
				v, err := gguf.Dequantize(gguf.F32, ts[i].Data, len(ts[i].Data)/4)
				if err != nil {
					t.Fatal(err)
				}
				ts[i].Type, ts[i].Data = typ, quantQ8_0(v)
			}
		}
		return arch, ts
	})
}

// TestPhi3GGUFMatchesDirectory: a Phi-3 / Phi-4-mini written as a GGUF in llama.cpp's phi3
// layout (fused attn_qkv and ffn_up, rope.dimension_count, LongRoPE factor tensors and
// attention factor, the sliding window) loads with the directory's config and gives its
// logits over 40 tokens (short factors, past the window) and 100 (long factors: past the
// original context of 64); a Q8_0 file keeps the fused matrices quantized.
func TestPhi3GGUFMatchesDirectory(t *testing.T) {
	for name, o := range phi3GGUFModels() {
		t.Run(name, func(t *testing.T) {
			dir, path := phi3GGUF(t, o, gguf.F32)
			want, err := model.Load(dir, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer want.Close()
			got, err := model.Load(path, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer got.Close()
			wc, gc := want.Config, got.Config
			if gc.RotaryDims() != wc.RotaryDims() || gc.SlidingWindow != wc.SlidingWindow || gc.TieWordEmbeddings != wc.TieWordEmbeddings ||
				(gc.RopeScaling == nil) != (wc.RopeScaling == nil) {
				t.Fatalf("GGUF config %+v\ndirectory config %+v", gc, wc)
			}
			if rs := wc.RopeScaling; rs != nil {
				g := gc.RopeScaling
				if g.OriginalMaxPositionEmbeddings != rs.OriginalMaxPositionEmbeddings || math.Abs(g.AttentionFactor-rs.AttentionFactor) > 1e-6 ||
					fmt.Sprint(g.ShortFactor) != fmt.Sprint(rs.ShortFactor) || len(g.LongFactor) != len(rs.LongFactor) {
					t.Fatalf("GGUF LongRoPE %+v, directory %+v", g, rs)
				}
			}
			for _, n := range []int{40, 100} {
				tokens := make([]int, n)
				for i := range tokens {
					tokens[i] = (i*37 + 11) % o.Vocab
				}
				wl, gl := allLogits(t, want, tokens), allLogits(t, got, tokens)
				worst := 0.0
				for p := range wl {
					for j := range wl[p] {
						worst = max(worst, math.Abs(float64(gl[p][j]-wl[p][j])))
					}
				}
				if worst > 1e-5 {
					t.Fatalf("%d tokens: GGUF logits differ from the directory's by up to %.3g", n, worst)
				}
			}
			_, qpath := phi3GGUF(t, o, gguf.Q8_0)
			q, err := model.Load(qpath, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			if q.Layers[0].Q.W.Q == nil || q.Layers[0].Up.W.Q == nil {
				t.Fatal("Q8_0 file: the fused projections were not kept quantized")
			}
		})
	}
}

// allLogits runs tokens through m in one prefill and returns the logits at every position.
func allLogits(t *testing.T, m *model.Model, tokens []int) [][]float32 {
	t.Helper()
	seq := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: 32}).NewSequence()
	out, err := m.Forward([]model.Step{{Seq: seq, Tokens: tokens, LogitsAt: all(len(tokens))}})
	if err != nil {
		t.Fatal(err)
	}
	return out[0]
}

// TestPhi3GGUFLayoutMatchesLlamaCpp: for the Phi-4-mini shape, model.GGUFMetadata and
// model.GGUFTensorName (what `hone export --format gguf` writes with) give the metadata keys
// and values, the extra tensors and the tensor names that llama.cpp's convert_hf_to_gguf.py
// wrote for the same model (testdata/phi3-llamacpp-layout.json, from
// scripts/gguf-goldens/phi3_layout.sh), so the files TestPhi3GGUFMatchesDirectory loads are
// llama.cpp's layout.
func TestPhi3GGUFLayoutMatchesLlamaCpp(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("testdata", "phi3-llamacpp-layout.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want struct {
		Metadata map[string]any `json:"metadata"`
		Tensors  [][]any        `json:"tensors"`
	}
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	o := phi3GGUFModels()["phi4mini"]
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	meta, vectors, err := model.GGUFMetadata(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, kv := range meta {
		got[kv.Key] = fmt.Sprint(kv.Value)
	}
	for k, v := range want.Metadata {
		w := fmt.Sprint(v)
		if x, ok := v.(float64); ok && x != math.Trunc(x) {
			w = fmt.Sprint(float32(x))
		}
		if got[k] != w {
			t.Errorf("metadata %s: Hone %q, llama.cpp %q", k, got[k], w)
		}
		delete(got, k)
	}
	if len(got) > 0 {
		t.Errorf("metadata llama.cpp does not write: %v", got)
	}
	wantT := map[string]string{}
	for _, w := range want.Tensors {
		wantT[w[0].(string)] = fmt.Sprint(w[1])
	}
	gotT := map[string]string{}
	for _, v := range vectors {
		gotT[v.Name] = fmt.Sprint([]int{len(v.Values)})
	}
	f, err := safetensors.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, name := range f.Names() {
		tn, _ := f.Tensor(name)
		gname, _, ok := model.GGUFTensorName(name)
		if !ok {
			t.Fatalf("no GGUF name for %s", name)
		}
		dims := make([]int, len(tn.Shape))
		for i, d := range tn.Shape {
			dims[len(dims)-1-i] = d
		}
		gotT[gname] = fmt.Sprint(dims)
	}
	if fmt.Sprint(gotT) != fmt.Sprint(wantT) {
		t.Errorf("tensors\n Hone %v\nllama.cpp %v", gotT, wantT)
	}
}

// TestPhi3GGUFLlamaCpp runs llama.cpp (HONE_LLAMA_CPP, built by scripts/test-setup.sh) on a
// phi3 GGUF written as Hone's export writes it, Phi-3 without RoPE scaling and with LongRoPE
// (a context of 64, the original one, so that llama.cpp uses the short factors as
// transformers does for a short sequence), and checks that its greedy continuations are
// Hone's on the same file.
func TestPhi3GGUFLlamaCpp(t *testing.T) {
	bin := llamaCppBin(t)
	for _, name := range []string{"plain", "phi3"} {
		o := phi3GGUFModels()[name]
		o.Std = 0.3 // peaked logits: no near ties between the two engines
		_, path := phi3GGUF(t, o, gguf.F32)
		checkLlamaCppGreedy(t, bin, path)
	}
}

func llamaCppBin(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("HONE_LLAMA_CPP")
	if bin == "" {
		t.Skip("HONE_LLAMA_CPP is not set (scripts/test-setup.sh)")
	}
	return bin
}

// checkLlamaCppGreedy checks that llama.cpp's greedy continuation (16 tokens, a context of
// 64) of two prompts is Hone's on the GGUF file at path, as text compared after both sides'
// invalid UTF-8 and padding tokens are normalised away (tiny models write byte tokens).
func checkLlamaCppGreedy(t *testing.T, bin, path string) {
	t.Helper()
	// llama-cli prints padding tokens and NUL as nothing and invalid UTF-8 as its bytes; Hone's
	// Decode names padding tokens and writes U+FFFD for invalid bytes.
	pad, bad := regexp.MustCompile(`\[PAD\d+\]|\x00`), regexp.MustCompile(`\x{FFFD}+`)
	clean := func(s string) string {
		return bad.ReplaceAllString(strings.ToValidUTF8(pad.ReplaceAllString(s, ""), "\uFFFD"), "?")
	}
	m, err := model.Load(path, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.LoadGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, prompt := range []string{"The quick brown fox", "Hello world, this is a test of"} {
		toks := tok.Encode(prompt, true)
		seq := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: 8}).NewSequence()
		var out []int
		for range 16 {
			l, err := m.Forward([]model.Step{{Seq: seq, Tokens: toks, LogitsAt: []int{len(toks) - 1}}})
			if err != nil {
				t.Fatal(err)
			}
			toks = []int{argmax(l[0][0])}
			out = append(out, toks[0])
		}
		hone := tok.Decode(out, false)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "llama-cli"), "-m", path, "-p", prompt, "-n", "16", "--temp", "0",
			"--top-k", "1", "-t", "2", "-c", "64", "-no-cnv", "--no-display-prompt", "--no-warmup", "--simple-io", "-s", "1")
		cmd.Stdin = strings.NewReader("")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		cancel()
		if err != nil {
			t.Fatalf("llama-cli: %v\n%s", err, stderr.String())
		}
		llama := strings.TrimSuffix(strings.TrimRight(stdout.String(), "\n "), "[end of text]")
		if clean(hone) != clean(llama) {
			t.Errorf("%s, %q: Hone continues %q, llama.cpp %q", m.Config.Arch, prompt, hone, llama)
		}
	}
}
