package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/honeai/hone/internal/export"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/registry"
)

func init() {
	register("export", "write a trained model as a Hugging Face directory or a GGUF file (base + LoRA merged), or its adapter as a GGUF LoRA", func(args []string) int {
		return runExport(context.Background(), args, os.Stdout, os.Stderr)
	})
}

const exportUsage = `usage: hone export --data DIR --model ENTITY/PROJECT/NAME[:stepN|:latest] --out OUT [--base-dir DIR]
                   [--format hf|gguf|gguf-lora] [--type f16|q8_0|q4_k|f32]

Merges a trained model's LoRA checkpoint into its base model's weights (W' = W + scaling·B·A,
in f32) and writes it in one of three formats (--format):

  hf         (default) a Hugging Face model directory OUT: config.json, generation_config.json
             and the tokenizer files copied from the base, and model.safetensors (the base's
             dtype). OUT must not exist or be empty.
  gguf       one GGUF file OUT for llama.cpp, Ollama and hone serve --model NAME=OUT, with the
             metadata convert_hf_to_gguf.py writes; --type picks the weights' encoding: f16
             (default), q8_0, q4_k (llama-quantize's Q4_K_M mix), or f32. From a GGUF base
             (--base-dir FILE.gguf): the base's metadata and tensors, the adapted weights
             merged, each tensor in the base's type unless --type says otherwise.
  gguf-lora  the adapter alone (not merged) as a llama.cpp LoRA adapter GGUF file OUT (f32),
             for llama-cli -m BASE.gguf --lora OUT or an Ollama Modelfile's ADAPTER OUT; the
             base is the base model as GGUF: hone export --model NAME:step0 --format gguf
             writes it (step 0 is the base itself, no adapter merged).

Works offline on the data directory (the server may be running). OUT appears whole or not at
all; a GGUF OUT must not exist.

The base model's directory: --base-dir, or DATA/models/demo for the demo model. The server's
--model NAME=DIR mapping is not stored in the data directory, so a trained model on any other
base needs --base-dir (the DIR or FILE.gguf of hone serve --model NAME=...; a GGUF base exports
as gguf or gguf-lora only).
`

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("export")
	dataDir := fs.String("data", "./hone-data", "data directory")
	dsn := fs.String("db", "", "store DSN (default DIR/hone.db)")
	ref := fs.String("model", "", "trained model ENTITY/PROJECT/NAME[:stepN|:latest] (required; default :latest)")
	out := fs.String("out", "", "output directory (required; must not exist or be empty)")
	baseDir := fs.String("base-dir", "", "base model directory, GGUF file or pulled reference (hf:OWNER/REPO, ollama:NAME; default DATA/models/demo for the demo model)")
	format := fs.String("format", "hf", "output format: hf (a Hugging Face directory), gguf (one GGUF file), gguf-lora (the adapter as a GGUF LoRA)")
	typ := fs.String("type", "", "weights of a --format gguf file: f16 (default), q8_0, q4_k or f32")
	pos, err := parseInterleaved(fs, args)
	if code, ok := flagError("export", exportUsage, fs, err, stdout, stderr); !ok {
		return code
	}
	if *ref == "" || *out == "" || len(pos) > 0 {
		fmt.Fprint(stderr, "hone export: --model ENTITY/PROJECT/NAME[:stepN] and --out OUTDIR are required and it takes no arguments\nRun 'hone export --help' for its flags.\n")
		return 2
	}
	switch *format {
	case "hf", "gguf-lora":
		if *typ != "" {
			fmt.Fprintf(stderr, "hone export: --type applies to --format gguf only (got --format %s --type %s)\n", *format, *typ)
			return 2
		}
	case "gguf":
		if _, ok := export.GGUFTypes[*typ]; !ok && *typ != "" {
			fmt.Fprintf(stderr, "hone export: --type %q: use f16, q8_0, q4_k or f32\n", *typ)
			return 2
		}
	default:
		fmt.Fprintf(stderr, "hone export: --format %q: use hf, gguf or gguf-lora\n", *format)
		return 2
	}
	base, err := pullPath(ctx, *baseDir, stderr) // pull.go: --base-dir hf:... or ollama:..., as hone serve --model took it
	if err != nil {
		fmt.Fprintln(stderr, "hone export: --base-dir:", err)
		return 1
	}
	dir, err := exportModel(ctx, *dataDir, *dsn, *ref, base, *out, *format, *typ, exportProgress(stderr))
	if err != nil {
		fmt.Fprintln(stderr, "hone export:", err)
		return 1
	}
	fmt.Fprintf(stdout, "Exported %s to %s\n", dir, *out)
	return 0
}

// exportModel resolves ref in the data directory's registry and writes the merged model to
// out; it returns the exported name with its step.
func exportModel(ctx context.Context, dataDir, dsn, ref, baseDir, out, format, typ string, progress export.Progress) (string, error) {
	name, tag, _ := strings.Cut(strings.TrimPrefix(ref, "wandb-artifact:///"), ":")
	if tag == "" {
		tag = "latest"
	}
	if len(strings.Split(name, "/")) != 3 {
		return "", fmt.Errorf("--model %q: use ENTITY/PROJECT/NAME[:stepN|:latest]", ref)
	}
	step := -1
	if tag != "latest" {
		n, err := strconv.Atoi(strings.TrimPrefix(tag, "step"))
		if !strings.HasPrefix(tag, "step") || err != nil || n < 0 {
			return "", fmt.Errorf("--model %q: the tag is :stepN or :latest", ref)
		}
		step = n
	}
	if dsn == "" {
		if _, err := os.Stat(filepath.Join(dataDir, "hone.db")); err != nil {
			return "", fmt.Errorf("no data directory at %s (no hone.db); give the one hone serve uses with --data", dataDir)
		}
	}
	store, _, err := openStore(ctx, dataDir, dsn)
	if err != nil {
		return "", err
	}
	defer store.Close()
	blobs, err := sharedBlobs(ctx, store, dataDir, nil)
	if err != nil {
		return "", err
	}
	reg, err := openRegistry(ctx, store, dataDir, blobs)
	if err != nil {
		return "", err
	}
	m, err := reg.Resolve(ctx, name)
	if errors.Is(err, registry.ErrNotFound) {
		return "", fmt.Errorf("no trained model %s in %s", name, dataDir)
	}
	if err != nil {
		return "", err
	}
	var c registry.Checkpoint
	switch {
	case step == 0 && format != "gguf":
		return "", fmt.Errorf("%s:step0 is the base model %s itself; there is no adapter to merge (--format gguf exports the base alone)", name, m.BaseModel)
	case step == 0:
	case step < 0:
		c, err = reg.Latest(ctx, m.ID)
		if errors.Is(err, registry.ErrNotFound) {
			return "", fmt.Errorf("%s has no checkpoint yet (train it first)", name)
		}
	default:
		c, err = reg.Step(ctx, m.ID, step)
		if errors.Is(err, registry.ErrNotFound) {
			return "", fmt.Errorf("%s has no checkpoint at step %d", name, step)
		}
	}
	if err != nil {
		return "", err
	}
	if baseDir == "" && blobs != nil { // a base model registered in the shared store
		if baseDir, err = registeredBaseDir(ctx, reg, m.BaseModel); err != nil {
			return "", err
		}
	}
	if baseDir == "" {
		if m.BaseModel != "demo" {
			return "", fmt.Errorf("the base model %q of %s is served from a directory the data directory does not record (hone serve --model %s=DIR); give that directory with --base-dir", m.BaseModel, name, m.BaseModel)
		}
		baseDir = filepath.Join(dataDir, "models", "demo")
	}
	if model.IsGGUF(baseDir) && format == "hf" {
		return "", fmt.Errorf("--base-dir %s is a GGUF file: it exports as --format gguf (merged, the base's metadata and tensor types unless --type) or gguf-lora; a Hugging Face directory needs a Hugging Face base", baseDir)
	}
	if format == "gguf" && typ == "" && !model.IsGGUF(baseDir) {
		typ = "f16"
	}
	cfg, err := export.BaseConfig(baseDir)
	if err != nil {
		return "", fmt.Errorf("base model %s: %w", baseDir, err)
	}
	var a *model.LoRA
	if step != 0 {
		ckpt, err := reg.CheckpointPath(ctx, m.ID, c.Step)
		if err != nil {
			return "", err
		}
		if a, err = model.LoadLoRA(ckpt, cfg); err != nil {
			return "", fmt.Errorf("checkpoint %s (does --base-dir hold the base %q it was trained on?): %w", ckpt, m.BaseModel, err)
		}
	}
	full := fmt.Sprintf("%s:step%d", name, c.Step)
	switch format {
	case "gguf":
		err = export.WriteGGUFProgress(out, baseDir, a, typ, full, progress)
	case "gguf-lora":
		err = export.WriteGGUFAdapter(out, baseDir, a, full)
	default:
		err = export.Write(out, baseDir, a)
	}
	if err != nil {
		return "", err
	}
	return full, nil
}

// exportProgress shows a GGUF export's progress on w: a bar redrawn in place on a terminal,
// else a line every few seconds and the last one; with the bytes written and their rate.
func exportProgress(w io.Writer) export.Progress {
	tty := isTerminal(w)
	start, last := time.Now(), time.Time{}
	return func(done, total int, bytes int64) {
		now := time.Now()
		if done < total && now.Sub(last) < map[bool]time.Duration{true: 200 * time.Millisecond, false: 5 * time.Second}[tty] {
			return
		}
		last = now
		rate := float64(bytes) / max(now.Sub(start).Seconds(), 1e-3)
		line := fmt.Sprintf("%s tensors, %s, %s/s", bar(done, total, 30), humanize.IBytes(uint64(bytes)), humanize.IBytes(uint64(rate)))
		switch {
		case tty && done < total:
			fmt.Fprintf(w, "\r%s", line)
		case tty:
			fmt.Fprintf(w, "\r%s\n", line)
		default:
			fmt.Fprintf(w, "export: %s\n", line)
		}
	}
}
