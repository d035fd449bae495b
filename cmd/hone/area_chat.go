package main

import (
	"context"
	"flag"
	"fmt"
	"path/filepath"
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
	noPrefixCache  bool
	maxLogprobs    int
	dtype          string
}

func init() {
	registerServeFlags(func(fs *flag.FlagSet) {
		chatCfg.models = nil // each parse starts from no --model
		fs.Var(&chatCfg.models, "model", "serve a Hugging Face model directory as NAME=DIR (repeatable); the first is the default")
		fs.BoolVar(&chatCfg.noDemo, "no-demo-model", false, "do not serve the demo model (written to DATA/models/demo on first start)")
		fs.StringVar(&chatCfg.policy, "scheduling-policy", "fcfs", "order of waiting requests: fcfs or priority (lower priority value first)")
		fs.IntVar(&chatCfg.maxQueue, "max-queue", 256, "waiting requests per model before 429")
		fs.IntVar(&chatCfg.maxRunning, "max-running", 64, "sequences in a model's running batch")
		fs.IntVar(&chatCfg.maxBatchTokens, "max-batch-tokens", 512, "tokens per forward pass (prefill chunks and decodes)")
		fs.IntVar(&chatCfg.kvBlocks, "kv-blocks", 0, "KV cache blocks of 16 positions per model (default: max-running × 1024 positions)")
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
			MaxBatchTokens: chatCfg.maxBatchTokens, KVBlocks: chatCfg.kvBlocks, NoPrefixCache: chatCfg.noPrefixCache, Logger: app.Logger},
			Prepack: !app.Config.WorkerOnly}
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
