package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/honeai/hone/internal/synth"
)

func init() {
	register("models", "models: list and rm (the cache of pulled models), synth (write a tiny random-weight HF model directory), prune (keep the best and latest checkpoints), register (base models by name in a shared store)", func(args []string) int {
		return runModels(args, os.Stdout, os.Stderr)
	})
}

const modelsUsage = `usage:
  hone models list | rm REF...   (the cache of pulled models, hone pull: list with sizes, remove)
  hone models prune --model ENTITY/PROJECT/NAME [--metric val/reward] [--keep-best N]
                    (on a server: delete every checkpoint but the latest and the N best by metric)
  hone models register|registered|unregister --db postgres://... (base models by name in a shared store)
  hone models synth --arch llama|qwen2|qwen3|phi3|mistral|ministral|gemma2|gemma3|qwen3moe --out DIR [--preset tiny|demo|smollm2-135m|qwen2.5-0.5b]
                    [--layers N --hidden N --heads N --kv-heads N --head-dim N --intermediate N
                     --vocab N --max-pos N --rope-theta F --rope-scaling llama3 --tied --dtype f32|bf16
                     --partial-rotary F (phi3) --sliding-window N --std F --seed N]
                    [qwen3moe: --experts N --experts-per-tok N --moe-intermediate N --no-norm-topk
                     --mlp-only-layers L,L]
Writes config.json, generation_config.json, model.safetensors (random weights), tokenizer.json and
tokenizer_config.json (a BPE tokenizer Hone trains on an embedded corpus, with a ChatML chat template).
Flags given explicitly override the preset.
`

func runModels(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, modelsUsage)
		return 2
	}
	if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, modelsUsage)
		return 0
	}
	if args[0] == "prune" {
		return runModelsPrune(context.Background(), args[1:], stdout, stderr)
	}
	if args[0] == "list" || args[0] == "ls" { // pull.go: the cache of pulled models
		return runModelsList(args[1:], stdout, stderr)
	}
	if args[0] == "rm" {
		return runModelsRm(args[1:], stdout, stderr)
	}
	if args[0] == "register" || args[0] == "registered" || args[0] == "unregister" {
		return runModelsStore(context.Background(), args[0], args[1:], stdout, stderr)
	}
	if args[0] != "synth" {
		fmt.Fprintf(stderr, "hone models: unknown subcommand %q\n\n%s", args[0], modelsUsage)
		return 2
	}
	fs := newFlagSet("models synth")
	arch := fs.String("arch", "", "architecture: llama, qwen2, qwen3, qwen3moe, phi3, mistral, ministral, gemma2 or gemma3 (required unless the preset gives it)")
	out := fs.String("out", "", "output directory (required)")
	preset := fs.String("preset", "tiny", "starting shape: tiny, demo, smollm2-135m, qwen2.5-0.5b")
	layers := fs.Int("layers", 0, "decoder layers")
	hidden := fs.Int("hidden", 0, "hidden size")
	heads := fs.Int("heads", 0, "attention heads")
	kvHeads := fs.Int("kv-heads", 0, "key/value heads (grouped-query attention)")
	headDim := fs.Int("head-dim", 0, "head dimension (default hidden/heads)")
	inter := fs.Int("intermediate", 0, "MLP intermediate size")
	vocab := fs.Int("vocab", 0, "vocabulary size")
	maxPos := fs.Int("max-pos", 0, "max_position_embeddings")
	theta := fs.Float64("rope-theta", 0, "rope_theta")
	ropeScaling := fs.String("rope-scaling", "", "rope_scaling type (llama3; llama only)")
	tied := fs.Bool("tied", false, "tie the LM head to the input embedding")
	partialRotary := fs.Float64("partial-rotary", 0, "partial_rotary_factor (phi3 only; Phi-4-mini: 0.75)")
	window := fs.Int("sliding-window", 0, "sliding_window (phi3, mistral, ministral, gemma2, gemma3; default: none for phi3, 8 otherwise)")
	dtype := fs.String("dtype", "", "stored weight type: f32 or bf16")
	std := fs.Float64("std", 0, "standard deviation of the random weights")
	seed := fs.Uint64("seed", 1, "random seed")
	applyMoE := moeSynthFlags(fs)
	if code, ok := flagError("models synth", modelsUsage, fs, parseWithEnv(fs, args[1:]), stdout, stderr); !ok {
		return code
	}
	if *out == "" {
		fmt.Fprintln(stderr, "hone models synth: --out is required")
		return 2
	}
	var o synth.Options
	switch *preset {
	case "tiny":
		o = synth.Tiny(*arch)
	case "demo":
		o = synth.Demo()
	case "smollm2-135m":
		o = synth.SmolLM2_135M()
	case "qwen2.5-0.5b":
		o = synth.Qwen25_05B()
	default:
		fmt.Fprintf(stderr, "hone models synth: unknown --preset %q (tiny, demo, smollm2-135m, qwen2.5-0.5b)\n", *preset)
		return 2
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["arch"] {
		o.Arch = *arch
	}
	ints := map[string]struct {
		dst *int
		v   int
	}{"layers": {&o.Layers, *layers}, "hidden": {&o.Hidden, *hidden}, "heads": {&o.Heads, *heads},
		"kv-heads": {&o.KVHeads, *kvHeads}, "head-dim": {&o.HeadDim, *headDim}, "intermediate": {&o.Intermediate, *inter},
		"vocab": {&o.Vocab, *vocab}, "max-pos": {&o.MaxPos, *maxPos}}
	for name, p := range ints {
		if set[name] {
			*p.dst = p.v
		}
	}
	if set["hidden"] || set["heads"] {
		if !set["head-dim"] {
			o.HeadDim = 0 // derive from the new hidden/heads
		}
	}
	if set["rope-theta"] {
		o.RopeTheta = *theta
	}
	if set["rope-scaling"] {
		o.RopeScaling = *ropeScaling
	}
	if set["tied"] {
		o.Tied = *tied
	}
	if set["partial-rotary"] {
		o.PartialRotary = *partialRotary
	}
	if set["sliding-window"] {
		o.SlidingWindow = *window
	}
	if set["dtype"] {
		o.DType = *dtype
	}
	if set["std"] {
		o.Std = *std
	}
	o.Seed = *seed
	if err := applyMoE(&o, set); err != nil {
		fmt.Fprintf(stderr, "hone models synth: %v\n", err)
		return 2
	}
	if err := synth.Write(*out, o); err != nil {
		fmt.Fprintf(stderr, "hone models synth: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %s model to %s\n", o.Arch, *out)
	return 0
}
