package main

import (
	"context"
	"flag"
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/honeai/hone/internal/chatapi"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/trace"
)

// ChatService is the name the chat model registry is provided under (the training area
// plugs its checkpoint resolver into it).
const ChatService = "chat"

// modelFlags collects repeated --model NAME=DIR flags.
type modelFlags []string

func (m *modelFlags) String() string     { return strings.Join(*m, ",") }
func (m *modelFlags) Set(v string) error { *m = append(*m, v); return nil }

var chatCfg struct {
	models         modelFlags
	noDemo         bool
	policy         string
	maxQueue       int
	maxRunning     int
	maxBatchTokens int
	kvBlocks       int
	kvMemory       byteSize
	maxModelLen    int
	noPrefixCache  bool
	maxLogprobs    int
	dtype          string
}

func init() {
	registerServeFlags(func(fs *flag.FlagSet) {
		fs.Var(&chatCfg.models, "model", "serve a Hugging Face model directory as NAME=DIR (repeatable); the first is the default")
		fs.BoolVar(&chatCfg.noDemo, "no-demo-model", false, "do not serve the demo model (written to DATA/models/demo on first start)")
		fs.StringVar(&chatCfg.policy, "scheduling-policy", "fcfs", "order of waiting requests: fcfs or priority (lower priority value first)")
		fs.IntVar(&chatCfg.maxQueue, "max-queue", 256, "waiting requests per model before 429")
		fs.IntVar(&chatCfg.maxRunning, "max-running", 64, "sequences in a model's running batch")
		fs.IntVar(&chatCfg.maxBatchTokens, "max-batch-tokens", 512, "tokens per forward pass (prefill chunks and decodes)")
		chatCfg.kvMemory = byteSize(inference.DefaultKVCacheBytes)
		fs.Var(&chatCfg.kvMemory, "kv-cache-memory", "most memory each model's KV cache may hold (1GiB, 512MiB, 2GB or bytes); allocated as sequences grow, not up front; bounds the context (max_model_len) when smaller than the model's")
		fs.IntVar(&chatCfg.kvBlocks, "kv-blocks", 0, "KV cache blocks of 16 positions per model, instead of --kv-cache-memory")
		fs.IntVar(&chatCfg.maxModelLen, "max-model-len", 0, "longest prompt plus output of a request (default: the model's max_position_embeddings)")
		fs.BoolVar(&chatCfg.noPrefixCache, "no-prefix-cache", false, "do not reuse cached KV blocks of earlier prompts (prefix caching is on by default)")
		fs.IntVar(&chatCfg.maxLogprobs, "max-logprobs", 20, "largest top_logprobs / prompt_logprobs a request may ask")
		fs.StringVar(&chatCfg.dtype, "dtype", "", "weights in memory: as stored (default), f32 or bf16")
	})
	registerArea(20, "chat", func(app *App, r *httpx.Router) error {
		if chatCfg.policy != "fcfs" && chatCfg.policy != "priority" {
			return fmt.Errorf("--scheduling-policy %q: use fcfs or priority", chatCfg.policy)
		}
		opts := chatapi.LoadOptions{DType: model.DType(chatCfg.dtype), Engine: inference.Options{
			Policy: chatCfg.policy, MaxQueue: chatCfg.maxQueue, MaxRunning: chatCfg.maxRunning,
			MaxBatchTokens: chatCfg.maxBatchTokens, KVCacheBytes: int64(chatCfg.kvMemory), KVBlocks: chatCfg.kvBlocks,
			NoPrefixCache: chatCfg.noPrefixCache, Logger: app.Logger},
			Prepack: !app.Config.WorkerOnly, MaxModelLen: chatCfg.maxModelLen}
		if chatCfg.maxModelLen < 0 {
			return fmt.Errorf("--max-model-len %d: use a positive number (0 = the model's)", chatCfg.maxModelLen)
		}
		reg := chatapi.NewRegistry()
		now := time.Now().Unix()
		for _, spec := range chatCfg.models {
			name, dir, ok := strings.Cut(spec, "=")
			if !ok || name == "" || dir == "" {
				return fmt.Errorf("--model %q: use NAME=DIR", spec)
			}
			s, err := chatapi.Load(name, dir, opts, now)
			if err != nil {
				return fmt.Errorf("--model %s: %w", name, err)
			}
			reportMemory(app, s)
			reg.Add(s)
		}
		if !chatCfg.noDemo {
			dir := filepath.Join(app.DataDir, "models", "demo")
			if !model.ModelDirExists(dir) {
				if err := synth.Write(dir, synth.Demo()); err != nil {
					return fmt.Errorf("writing the demo model: %w", err)
				}
				fmt.Fprintf(app.Stdout, "wrote the demo model (random weights) to %s\n", dir)
			}
			s, err := chatapi.Load("demo", dir, opts, now)
			if err != nil {
				return fmt.Errorf("demo model: %w", err)
			}
			reportMemory(app, s)
			reg.Add(s)
		}
		app.OnShutdown(func(context.Context) error { reg.Close(); return nil })
		app.Provide(ChatService, reg)
		api := &chatapi.API{Reg: reg, MaxLogprobs: chatCfg.maxLogprobs, PriorityEnabled: chatCfg.policy == "priority", Logger: app.Logger}
		if svc, ok := app.Lookup(TraceService); ok {
			api.Tracer = chatTracer{svc: svc.(*trace.Service)}
		}
		api.Register(r, app.Bearer)
		return nil
	})
}

// reportMemory says at start how much memory a served model takes: its weights (packed copies
// included) and the most its KV cache may hold, with the positions that is, and the context
// served when the cache makes it shorter than the model's.
func reportMemory(app *App, s *chatapi.Served) {
	kv := s.Engine.KVCache()
	weights := s.Model.WeightBytes()
	app.Logger.Info("model loaded", "model", s.Name, "weights_bytes", weights, "kv_cache_max_bytes", kv.MaxBytes,
		"kv_cache_blocks", kv.Blocks, "kv_cache_tokens", kv.Tokens(), "max_model_len", s.MaxModelLen())
	if app.Config.WorkerOnly {
		return
	}
	line := fmt.Sprintf("model %s: weights %s, KV cache up to %s (%d tokens, allocated as used), context %d tokens",
		s.Name, formatBytes(weights), formatBytes(kv.MaxBytes), kv.Tokens(), s.MaxModelLen())
	if own := s.Model.Config.MaxPositionEmbeddings; s.MaxModelLen() < own && kv.Tokens() < own && s.MaxModelLen() == kv.Tokens() {
		line += fmt.Sprintf(" (the model's is %d: a larger --kv-cache-memory allows more)", own)
	}
	fmt.Fprintln(app.Stdout, line)
}

// byteSize is a flag of a memory size: bytes, or a number with a unit (KiB, MiB, GiB, TiB;
// KB, MB, GB, TB; K, M, G, T as binary units), e.g. 1GiB, 512MiB, 1.5G.
type byteSize int64

func (b *byteSize) String() string { return formatBytes(int64(*b)) }

func (b *byteSize) Set(v string) error {
	n, err := parseByteSize(v)
	if err != nil {
		return err
	}
	*b = byteSize(n)
	return nil
}

func parseByteSize(v string) (int64, error) {
	s := strings.TrimSpace(v)
	i := len(s)
	for i > 0 && (s[i-1] < '0' || s[i-1] > '9') && s[i-1] != '.' {
		i--
	}
	num, unit := strings.TrimSpace(s[:i]), strings.TrimSpace(s[i:])
	mult := map[string]float64{"": 1, "b": 1,
		"k": 1 << 10, "kib": 1 << 10, "kb": 1e3,
		"m": 1 << 20, "mib": 1 << 20, "mb": 1e6,
		"g": 1 << 30, "gib": 1 << 30, "gb": 1e9,
		"t": 1 << 40, "tib": 1 << 40, "tb": 1e12}[strings.ToLower(unit)]
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || mult == 0 || !(f*mult >= 1 && f*mult < math.MaxInt64) {
		return 0, fmt.Errorf("%q is not a memory size (use bytes or a unit: 512MiB, 1GiB, 2GB)", v)
	}
	return int64(f * mult), nil
}

// formatBytes writes n in binary units with one decimal (1.0 GiB, 540.2 MiB).
func formatBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, u := float64(n), 0
	for f >= 1000 && u < len(units)-1 {
		f /= 1024
		u++
	}
	if u == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return fmt.Sprintf("%.1f %s", f, units[u])
}
