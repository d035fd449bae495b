package main

import (
	"context"
	"fmt"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/toolcall"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/evaluation"
	"github.com/honeai/hone/internal/health"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/loop"
	"github.com/honeai/hone/internal/metrics"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/quota"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/respstore"
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/telemetry"
	"github.com/honeai/hone/internal/trace"
	"github.com/honeai/hone/internal/training"
	"github.com/honeai/hone/internal/version"
	"github.com/honeai/hone/internal/wandb"
)

// system is everything `hone serve` runs, one field per part, built in dependency order by
// newSystem: the store and keys, the trace service, the served models, the model registry
// and job queue, and the training service on them. `hone worker` is the same system with
// models loaded for training only (no inference engines) and no HTTP handler.
type system struct {
	cfg    ServeConfig
	log    *slog.Logger
	stdout io.Writer // messages for the user (the first-start key, the listen address)

	db       *db.DB
	keys     *auth.Keys
	checks   *health.Checks
	trace    *trace.Service
	models   *serving.Models
	reg      *registry.Registry
	queue    *jobs.Queue
	training *training.Service
	wandb    *wandb.Service
	// responses keeps the Responses API's stored responses.
	responses *respstore.Store
	blobs     *blob.Cache          // the shared blob store on PostgreSQL (shared.go); nil on SQLite
	quota     *quota.Quota         // what each entity's uploads store (--entity-quota)
	baseOpts  serving.LoadOptions  // how registered base models are loaded (shared.go)
	loaded    sync.Map             // registered base model name → the id this node loaded
	metrics   *metrics.Registry    // GET /metrics (--metrics-addr, --metrics-on-api)
	tel       *telemetry.Telemetry // Hone's own spans over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT); nil: none
	// evals runs evaluations (loop.go); evalEngines are the engines `hone worker` started for them.
	evals       *evaluation.Service
	evalEngines []*serving.Served
	loop        *loop.Service // aliases, promotions and training policies (loop.go)

	workers     sync.WaitGroup
	stopWorking context.CancelFunc
}

// newSystem builds the system of cfg; close releases it.
func newSystem(ctx context.Context, cfg ServeConfig, logger *slog.Logger, stdout io.Writer) (_ *system, err error) {
	if _, err := inference.ParsePolicy(string(cfg.Chat.Policy)); err != nil {
		return nil, fmt.Errorf("--scheduling-policy: %w", err)
	}
	if _, err := toolParsers(cfg.Chat.ToolParsers); err != nil {
		return nil, err
	}
	if _, err := chatTemplates(cfg.Chat.ChatTemplates); err != nil {
		return nil, err
	}
	if cfg.Chat.MaxModelLen < 0 {
		return nil, fmt.Errorf("--max-model-len %d: use a positive number (0 = the model's)", cfg.Chat.MaxModelLen)
	}
	s := &system{cfg: cfg, log: logger, stdout: stdout, checks: health.NewChecks(), models: serving.NewModels(), metrics: metrics.New()}
	if s.db, s.keys, err = openStore(ctx, cfg.DataDir, cfg.DSN); err != nil {
		return nil, err
	}
	s.metrics.Store.SetDB(s.db)
	s.metrics.Serving.SetModels(s.models.List)
	role := "serve"
	if cfg.WorkerOnly {
		role = "worker"
	}
	if s.tel, err = telemetry.FromEnv(ctx, role, version.Version); err != nil {
		return nil, err
	}
	if s.tel != nil {
		logger.Info("exporting spans (OpenTelemetry)", "endpoint", s.tel.Endpoint)
	}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	s.checks.Register("database", func(ctx context.Context) (map[string]any, error) {
		return map[string]any{"dialect": s.db.Dialect().String()}, s.db.Ping(ctx)
	})
	s.checks.Register("inference", func(context.Context) (map[string]any, error) {
		// Each served model's engine: sequences running and waiting, tokens generated.
		models := map[string]any{}
		for _, m := range s.models.List() {
			if m.Engine != nil {
				st := m.Engine.Stats()
				models[m.Name] = map[string]any{"running": st.Running, "waiting": st.Waiting, "generated_tokens": st.GeneratedTokens}
			}
		}
		return map[string]any{"models": models}, nil
	})
	if !cfg.WorkerOnly {
		if err := ensureInitialKey(ctx, s.keys, cfg.DataDir, stdout); err != nil {
			return nil, fmt.Errorf("initial API key: %w", err)
		}
	}
	traceStore := trace.NewSQLStore(s.db)
	if err := traceStore.Migrate(ctx); err != nil {
		return nil, err
	}
	if s.blobs, err = sharedBlobs(ctx, s.db, cfg.DataDir, logger); err != nil {
		return nil, err
	}
	var traceFiles trace.Store = traceStore
	if s.blobs != nil { // several nodes: trace files as shared blobs
		traceFiles = trace.WithFileBlobs(traceStore, s.blobs)
	}
	s.trace = trace.NewService(s.metrics.Trace.Store(traceFiles))
	s.trace.SetLogger(logger)
	if s.quota, err = quota.Open(ctx, s.db, int64(cfg.EntityQuota)); err != nil {
		return nil, err
	}
	s.trace.Quota = s.quota
	if s.reg, err = openRegistry(ctx, s.db, cfg.DataDir, s.blobs); err != nil {
		return nil, err
	}
	if err := s.loadModels(ctx); err != nil {
		return nil, err
	}
	// Loading left garbage (parsed metadata, the tokenizers' JSON, packing scratch) that would
	// set the collector's first goals: collect it and return its pages before serving.
	debug.FreeOSMemory()
	if s.queue, err = jobs.Open(ctx, s.db); err != nil {
		return nil, err
	}
	s.metrics.Jobs.SetQueue(s.queue)
	if cfg.Train.Lease > 0 {
		s.queue.Lease = cfg.Train.Lease
	}
	if cfg.Train.MaxAttempts > 0 {
		s.queue.MaxAttempts = cfg.Train.MaxAttempts
	}
	if s.wandb, err = wandb.Open(ctx, s.db, filepath.Join(cfg.DataDir, "files")); err != nil {
		return nil, err
	}
	s.wandb.MaxUpload, s.wandb.Quota = int64(cfg.MaxUploadSize), s.quota
	if s.responses, err = respstore.Open(ctx, s.db); err != nil {
		return nil, err
	}
	s.training = &training.Service{Reg: s.reg, Queue: s.queue, Models: s.models, Trace: s.trace, Artifacts: s.wandb,
		FilesDir: filepath.Join(cfg.DataDir, "files"), DataRoot: cfg.Train.DataRoot, Log: logger,
		LoRARank: cfg.Train.Rank, LoRAAlpha: cfg.Train.Alpha, SFTSaveEvery: cfg.Train.SFTSaveEvery,
		MaxUpload: int64(cfg.MaxUploadSize), Quota: s.quota}
	s.training.LoRA = s.wandb // checkpoints are W&B lora artifacts too
	if s.blobs != nil {
		s.training.Blobs = s.blobs
		s.wandb.UseBlobs(s.blobs)
	}
	if err := s.openEvaluation(ctx); err != nil { // loop.go
		return nil, err
	}
	return s, nil
}

// loadModels loads the --model directories, the base models registered in a shared store
// (shared.go), and the demo model (written on first start).
func (s *system) loadModels(ctx context.Context) error {
	c := s.cfg.Chat
	opts := serving.LoadOptions{DType: model.DType(c.DType), Engine: inference.Options{
		Policy: c.Policy, MaxQueue: c.MaxQueue, MaxQueuePerKey: c.MaxQueuePerKey, MaxRunning: c.MaxRunning,
		MaxBatchTokens: c.MaxBatchTokens, KVCacheBytes: int64(c.KVMemory), KVBlocks: c.KVBlocks, KVCacheDType: kvcache.DType(c.KVDType),
		NoPrefixCache: c.NoPrefixCache, Logger: s.log, Speculative: c.Speculative.spec},
		Prepack: !s.cfg.WorkerOnly, NoEngine: s.cfg.WorkerOnly, MaxModelLen: c.MaxModelLen}
	now := time.Now().Unix()
	// --quantize applies to the --model models, not to the demo model.
	qopts := opts
	var err error
	if qopts.Quantize, err = model.ParseQuantize(c.Quantize); err != nil {
		return fmt.Errorf("--quantize: %w", err)
	}
	for _, spec := range c.Models {
		name, dir, ok := strings.Cut(spec, "=")
		if !ok || name == "" || dir == "" {
			return fmt.Errorf("--model %q: use NAME=DIR, NAME=FILE.gguf, or NAME=REF (hf:OWNER/REPO, ollama:NAME: hone pull --help)", spec)
		}
		src, err := pullForServe(ctx, name, dir, s.log) // pull.go: hf: and ollama: references
		if err != nil {
			return fmt.Errorf("--model %s: %w", name, err)
		}
		m, err := s.loadServed(name, src.path, src.loadOptions(qopts), now, true)
		if err != nil {
			return fmt.Errorf("--model %s: %w", name, err)
		}
		s.reportSource(name, src)
		s.setToolParser(m)
		s.reportMemory(m)
		s.models.Add(m)
	}
	s.baseOpts = qopts
	if err := s.loadRegistered(ctx, qopts, now); err != nil {
		return err
	}
	if c.NoDemo {
		return s.checkFlags()
	}
	dir := filepath.Join(s.cfg.DataDir, "models", "demo")
	wrote, err := ensureDemoModel(dir, s.log)
	if err != nil {
		return fmt.Errorf("writing the demo model: %w", err)
	}
	if wrote {
		fmt.Fprintf(s.stdout, "wrote the demo model (random weights) to %s\n", dir)
	}
	m, err := s.loadServed("demo", dir, opts, now, false)
	if err != nil {
		return fmt.Errorf("demo model: %w", err)
	}
	s.setToolParser(m)
	s.reportMemory(m)
	s.models.Add(m)
	return s.checkFlags()
}

// checkFlags refuses a --tool-call-parser or --chat-template NAME=... for a model not served.
func (s *system) checkFlags() error {
	if err := s.checkToolParsers(); err != nil {
		return err
	}
	return s.checkChatTemplates()
}

// reportMemory says at start how much memory a served model takes: its weights (packed
// copies included) and the most its KV cache may hold, with the positions that is, and the
// context served when the cache makes it shorter than the model's.
func (s *system) reportMemory(m *serving.Served) {
	weights := m.Model.WeightBytes()
	if m.Engine == nil { // hone worker: training only
		s.log.Info("model loaded", "model", m.Name, "weights_bytes", weights)
		return
	}
	kv := m.Engine.KVCache()
	s.log.Info("model loaded", "model", m.Name, "weights_bytes", weights, "kv_cache_max_bytes", kv.MaxBytes,
		"kv_cache_blocks", kv.Blocks, "kv_cache_tokens", kv.Tokens(), "kv_cache_dtype", kv.DType.String(), "max_model_len", m.MaxModelLen(),
		"kv_window", kv.Window, "kv_window_sequences", kv.WindowSequences)
	line := fmt.Sprintf("model %s: weights %s, KV cache up to %s (%d tokens in %s, allocated as used), context %d tokens",
		m.Name, humanize.IBytes(uint64(weights)), humanize.IBytes(uint64(kv.MaxBytes)), kv.Tokens(), kv.DType, m.MaxModelLen())
	if own := m.Model.Config.MaxPositionEmbeddings; m.MaxModelLen() < own && kv.Tokens() < own && m.MaxModelLen() == kv.Tokens() {
		line += fmt.Sprintf(" (the model's is %d: a larger --kv-cache-memory allows more)", own)
	}
	if kv.Window > 0 {
		line += fmt.Sprintf("; its sliding layers keep %d-token windows, %d sequences' at once", kv.Window, kv.WindowSequences)
	}
	fmt.Fprintln(s.stdout, line)
}

// startWorkers runs the configured training workers until stopWorkers (or ctx ends).
func (s *system) startWorkers(ctx context.Context) {
	wctx, cancel := context.WithCancel(ctx)
	s.stopWorking = cancel
	s.watchBaseModels(wctx) // shared.go: newly registered base models, on a shared store
	// Checkpoints made before they were published as W&B lora artifacts (or while that
	// failed) are published now.
	s.workers.Add(1)
	go func() {
		defer s.workers.Done()
		if err := s.training.SyncAllLoRA(wctx); err != nil && wctx.Err() == nil {
			s.log.Warn("training: checkpoints not published as W&B lora artifacts", "err", err)
		}
	}()
	s.workers.Add(1)
	go func() {
		defer s.workers.Done()
		s.sweepTemps(wctx) // sweep.go
	}()
	s.watchPolicies(wctx) // loop.go
	if keep := s.cfg.Chat.ResponsesRetention; keep > 0 {
		s.workers.Add(1)
		go func() {
			defer s.workers.Done()
			s.expireResponses(wctx, keep)
		}()
	}
	n := s.cfg.Train.Workers
	if n <= 0 {
		return
	}
	s.workers.Add(1)
	go func() {
		defer s.workers.Done()
		s.queue.Work(wctx, n, hostOwner(), s.jobRunner(), s.log) // loop.go
	}()
}

// expireResponses deletes the stored responses older than keep, at start and every hour,
// until ctx ends.
func (s *system) expireResponses(ctx context.Context, keep time.Duration) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := s.responses.DeleteOlder(ctx, time.Now().Add(-keep)); err != nil && ctx.Err() == nil {
			s.log.Warn("responses: stored responses not expired", "err", err)
		} else if n > 0 {
			s.log.Info("responses: expired stored responses", "count", n, "older_than", keep.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// stopWorkers stops the training workers and waits for them: a running job stops at its
// next step boundary and is handed back to the queue at once (jobs.Queue.Release), to run
// again on the next start or on another worker. close unmaps the models only after this,
// and each model waits for its remaining users (serving.Served.Acquire) besides.
func (s *system) stopWorkers() {
	if s.stopWorking != nil {
		s.stopWorking()
	}
	s.workers.Wait()
}

// close stops the engines and closes the store.
func (s *system) close() {
	s.stopWorkers()
	s.closeEvaluation()
	s.models.Close()
	if s.tel != nil { // the spans not yet sent
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := s.tel.Shutdown(sctx); err != nil {
			s.log.Warn("spans not sent (OpenTelemetry)", "err", err)
		}
		cancel()
	}
	if s.db == nil {
		return
	}
	if err := s.db.Close(); err != nil {
		s.log.Error("closing the store", "err", err)
	} else {
		s.log.Info("store closed")
	}
}

// hostOwner names this process as a job-lease owner.
func hostOwner() string {
	h, _ := os.Hostname()
	return h + "/" + strconv.Itoa(os.Getpid())
}

// toolParsers reads --tool-call-parser values: PARSER (key "") or NAME=PARSER.
func toolParsers(values []string) (map[string]string, error) {
	out := map[string]string{}
	for _, v := range values {
		name, parser, ok := strings.Cut(v, "=")
		if !ok {
			name, parser = "", v
		}
		if !toolcall.Valid(parser) {
			return nil, fmt.Errorf("--tool-call-parser %q: use %s, or NAME=PARSER for one model", v, strings.Join(toolcall.Families, ", "))
		}
		out[name] = parser
	}
	return out, nil
}

// setToolParser gives a served model its --tool-call-parser (its own, else the one for
// every model; none given: detected from its chat template per request).
func (s *system) setToolParser(m *serving.Served) {
	parsers, _ := toolParsers(s.cfg.Chat.ToolParsers)
	if p, ok := parsers[m.Name]; ok {
		m.ToolParser = p
	} else {
		m.ToolParser = parsers[""]
	}
	if m.Template == nil {
		return
	}
	fam := toolcall.Choose(m.ToolParser, m.Template.Source())
	attrs := []any{"model", m.Name, "parser", fam}
	switch {
	case m.ToolParser != "":
		attrs = append(attrs, "from", "--tool-call-parser")
	case fam != toolcall.Generic:
		attrs = append(attrs, "from", "the chat template's tool syntax")
	default:
		caps := m.Template.Caps(m.SpecialTokens())
		tools, calls, results := "a system preamble", "written into the assistant's content", "user turns of <tool_response> blocks"
		if caps.Tools {
			tools = "the template's tools variable, and the call format in a system preamble"
		}
		if !caps.System {
			tools = strings.Replace(tools, "a system preamble", "a preamble to the first user turn", 1)
		}
		if caps.ToolCalls {
			calls = "the template's"
		}
		if caps.ToolResults {
			results = "the template's"
		}
		attrs = append(attrs, "from", "the chat template shows no tool syntax: Hone's generic format (<tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>)",
			"tools_in", tools, "past_calls", calls, "tool_results", results)
	}
	s.log.Info("tool calls", attrs...)
}

// checkToolParsers refuses a --tool-call-parser NAME=PARSER for a model not served.
func (s *system) checkToolParsers() error {
	parsers, _ := toolParsers(s.cfg.Chat.ToolParsers)
	for name := range parsers {
		if _, ok := s.models.Get(name); name != "" && !ok {
			return fmt.Errorf("--tool-call-parser %s=%s: no model %q is served", name, parsers[name], name)
		}
	}
	return nil
}

// demoTmpPrefix begins the name of the directory the demo model is written into before it is
// renamed to its place.
const demoTmpPrefix = ".tmp-demo-"

// demoComplete lists the files a whole demo model directory has.
var demoComplete = []string{"config.json", "generation_config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"}

// ensureDemoModel writes the demo model to dir unless a whole one is there: into a temporary
// directory beside it, renamed into place once complete, so that a process killed while
// writing leaves no half-written model. What an interrupted write left (a temporary
// directory, or a dir missing files, as versions that wrote in place could leave) is removed
// first. It reports whether it wrote the model.
func ensureDemoModel(dir string, log *slog.Logger) (bool, error) {
	parent := filepath.Dir(dir)
	if leftovers, _ := filepath.Glob(filepath.Join(parent, demoTmpPrefix+"*")); len(leftovers) > 0 {
		for _, l := range leftovers {
			log.Warn("removing an interrupted write of the demo model", "path", l)
			if err := os.RemoveAll(l); err != nil {
				return false, err
			}
		}
	}
	if _, err := os.Stat(dir); err == nil {
		missing := ""
		for _, f := range demoComplete {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				missing = f
				break
			}
		}
		if missing == "" {
			return false, nil
		}
		log.Warn("the demo model directory is incomplete (an interrupted write); writing it again", "dir", dir, "missing", missing)
		if err := os.RemoveAll(dir); err != nil {
			return false, err
		}
	}
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp(parent, demoTmpPrefix)
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp) // gone after the rename; left by a failure
	if err := synth.Write(tmp, synth.Demo()); err != nil {
		return false, err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return false, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return false, err
	}
	if d, err := os.Open(parent); err == nil { // the rename survives a crash
		_ = d.Sync()
		d.Close()
	}
	return true, nil
}
