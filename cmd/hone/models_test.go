package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/model"
)

func TestModelsSynth(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	var out, errb bytes.Buffer
	code := runModels([]string{"synth", "--arch", "qwen2", "--out", dir, "--layers", "3", "--hidden", "48", "--heads", "6", "--kv-heads", "2", "--dtype", "bf16"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Arch != "qwen2" || cfg.NumLayers != 3 || cfg.HiddenSize != 48 || cfg.HeadDim != 8 || cfg.NumKVHeads != 2 || cfg.TorchDType != "bfloat16" {
		t.Fatalf("config %+v", cfg)
	}
	for args, want := range map[string]string{
		"synth --arch gpt2 --out X":  "unsupported arch",
		"synth --arch llama":         "--out is required",
		"synth --preset big --out X": "unknown --preset",
		"grow":                       "unknown subcommand",
		"synth --arch llama --heads 5 --kv-heads 5 --out X": "must equal heads",
	} {
		errb.Reset()
		a := strings.Fields(strings.ReplaceAll(args, "X", filepath.Join(t.TempDir(), "x")))
		if code := runModels(a, &out, &errb); code == 0 || !strings.Contains(errb.String(), want) {
			t.Errorf("%s: exit %d, stderr %q", args, code, errb.String())
		}
	}
}
