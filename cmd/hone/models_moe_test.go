package main

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/model"
)

// TestModelsSynthQwen3MoE: `hone models synth --arch qwen3moe` with the expert flags writes a
// model that loads with those experts and dense layers; bad expert flags are refused.
func TestModelsSynthQwen3MoE(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	var out, errb bytes.Buffer
	code := runModels([]string{"synth", "--arch", "qwen3moe", "--out", dir, "--layers", "3", "--experts", "4",
		"--experts-per-tok", "3", "--moe-intermediate", "16", "--no-norm-topk", "--mlp-only-layers", "0,2"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	mc := m.Config.MoE
	if m.Config.Arch != "qwen3moe" || mc == nil || mc.NumExperts != 4 || mc.TopK != 3 || mc.Intermediate != 16 || mc.NormTopK ||
		fmt.Sprint(mc.Sparse) != "[false true false]" || m.Layers[1].MoE == nil || m.Layers[0].MoE != nil {
		t.Fatalf("config %+v, moe %+v", m.Config, mc)
	}
	for args, want := range map[string]string{
		"synth --arch qwen3moe --experts 2 --experts-per-tok 3 --out X": "experts per token 3",
		"synth --arch qwen3moe --mlp-only-layers 1,x --out X":           "not a layer index",
		"synth --arch qwen3moe --mlp-only-layers 9 --out X":             "mlp-only layer 9",
		"synth --arch llama --experts 4 --out X":                        "only offered for qwen3moe",
	} {
		errb.Reset()
		a := strings.Fields(strings.ReplaceAll(args, "X", filepath.Join(t.TempDir(), "x")))
		if code := runModels(a, &out, &errb); code == 0 || !strings.Contains(errb.String(), want) {
			t.Errorf("%s: exit %d, stderr %q", args, code, errb.String())
		}
	}
}
