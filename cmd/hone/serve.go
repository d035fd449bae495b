package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/training"
	"github.com/honeai/hone/internal/version"
)

func init() {
	register("serve", "start the Hone server (chat completions, training API, trace store)", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runServe(ctx, args, os.Stdout, os.Stderr, nil)
	})
}

// ServeConfig is the configuration of `hone serve` (and `hone worker`): the server's, and
// the chat and training parts'.
type ServeConfig struct {
	// WorkerOnly runs training jobs only, without listening (`hone worker`).
	WorkerOnly        bool
	Addr              string
	DataDir           string
	DSN               string
	MaxBodyBytes      int64
	MaxUploadSize     byteSize // one uploaded file (W&B uploads, training data, trace files)
	EntityQuota       byteSize // what one entity's uploads store in all (0: no quota)
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	ShutdownTimeout   time.Duration
	MaxConcurrentKey  int
	MaxReadsPerKey    int      // concurrent requests per key on the routes that read stored data (httpx.Heavy)
	RequestMemory     byteSize // the process's memory budget for requests on those routes
	LogLevel          string
	LogFormat         string
	Chat              ChatConfig
	Train             TrainConfig
	// BaseModelPoll is how often a node on a shared store looks for newly registered base
	// models (`hone models register`) to load (0: only at start).
	BaseModelPoll time.Duration
	// MetricsAddr serves GET /metrics on a listener of its own, without a key ("": none);
	// MetricsOnAPI serves it on the API port too, behind a key.
	MetricsAddr  string
	MetricsOnAPI bool
}

// ChatConfig is how the served models are loaded and scheduled.
type ChatConfig struct {
	Models         modelFlags // --model NAME=DIR or NAME=FILE.gguf, in order
	NoDemo         bool
	Policy         inference.Policy
	MaxQueue       int
	MaxQueuePerKey int // one API key's share of MaxQueue
	MaxRunning     int
	MaxBatchTokens int
	KVMemory       byteSize    // the most each model's KV cache may hold
	KVBlocks       int         // instead of KVMemory
	KVDType        kvDTypeFlag // --kv-cache-dtype: auto, f32 or f16
	MaxModelLen    int         // 0: the model's
	NoPrefixCache  bool
	MaxLogprobs    int
	DType          string
	Quantize       string // --quantize: q8_0 or q4_k for the --model models, "" none
	// ToolParsers is --tool-call-parser: PARSER for every model, or NAME=PARSER for one.
	ToolParsers modelFlags
	// ChatTemplates is --chat-template: FILE for every model, or NAME=FILE for one.
	ChatTemplates modelFlags
	// Speculative is --speculative-config (prompt-lookup speculative decoding for every
	// request that does not set its own).
	Speculative specFlag
	// ResponsesRetention is how long the Responses API's stored responses are kept (0: for
	// ever).
	ResponsesRetention time.Duration
}

// TrainConfig is how training jobs run.
type TrainConfig struct {
	Workers  int           // jobs run at once in this process
	DataRoot string        // local training_data_url paths must lie under it
	Rank     int           // LoRA rank of new models
	Alpha    float64       // LoRA alpha of new models
	Lease    time.Duration // how long a claimed job stays claimed without renewal
	// MaxAttempts is how many runs in a row whose worker died without progress fail a job.
	MaxAttempts int
	// SFTSaveEvery is how often a running SFT job saves the state it resumes from.
	SFTSaveEvery time.Duration
	// PolicyCheck is how often training policies are checked for new feedback (loop.go).
	PolicyCheck time.Duration
}

// defaultRequestMemory is --request-memory's default: room for several requests at the
// largest bound of one (32 MiB of values for /refs/read_batch, twice: loaded and answered).
const defaultRequestMemory = byteSize(256 << 20)

// defaultMaxUpload is --max-upload-size's default: room for LoRA checkpoints (tens to
// hundreds of MiB) and training datasets of several GiB.
const defaultMaxUpload = byteSize(8 << 30)

// byteSize is a flag of a memory size: bytes, or a number with a unit (KiB, MiB, GiB, TiB
// binary; KB, MB, GB, TB and K, M, G, T decimal), as go-humanize reads them.
type byteSize int64

func (b *byteSize) String() string { return humanize.IBytes(uint64(*b)) }

func (b *byteSize) Set(v string) error {
	n, err := humanize.ParseBytes(v)
	if err != nil || n < 1 || n > math.MaxInt64 {
		return fmt.Errorf("%q is not a memory size (use bytes or a unit: 512MiB, 1GiB, 2GB)", v)
	}
	*b = byteSize(n)
	return nil
}

// kvDTypeFlag is --kv-cache-dtype.
type kvDTypeFlag kvcache.DType

func (k *kvDTypeFlag) String() string { return kvcache.DType(*k).String() }

func (k *kvDTypeFlag) Set(v string) error {
	d, err := kvcache.ParseDType(v)
	if err != nil {
		return fmt.Errorf("%q is not a KV cache dtype (auto, f32 or f16)", v)
	}
	*k = kvDTypeFlag(d)
	return nil
}

// modelFlags collects repeated --model NAME=DIR (or NAME=FILE.gguf) flags.
type modelFlags []string

func (m *modelFlags) String() string     { return strings.Join(*m, ",") }
func (m *modelFlags) Set(v string) error { *m = append(*m, v); return nil }

const serveUsage = `usage: hone serve [flags]

Starts Hone on one port: chat completions (/v1/chat/completions), the training API with its
workers (/v1/preview/...) and the Weave-compatible trace store. Every flag also reads
HONE_<FLAG> from the environment (dashes as underscores, e.g. HONE_ADDR); a flag on the
command line wins.
`

const workerUsage = `usage: hone worker [flags]

Runs training jobs from the store of a hone serve, apart from the API server: give it the
server's --data (and --db); it listens on no port. It takes hone serve's flags (and their
HONE_<FLAG> environment variables); --train-workers defaults to 1.
`

func newServeFlags(cfg *ServeConfig) *flag.FlagSet {
	fs := newFlagSet("serve")
	fs.StringVar(&cfg.Addr, "addr", "127.0.0.1:8080", "address to listen on")
	fs.StringVar(&cfg.DataDir, "data", "./hone-data", "data directory: database, blobs, models, checkpoints (created if missing)")
	fs.StringVar(&cfg.DSN, "db", "", "store DSN: a postgres:// URL, or an SQLite path (default DIR/hone.db)")
	fs.Int64Var(&cfg.MaxBodyBytes, "max-body-bytes", 64<<20, "largest accepted request body in bytes")
	cfg.MaxUploadSize = defaultMaxUpload
	fs.Var(&cfg.MaxUploadSize, "max-upload-size", "largest uploaded file (a W&B artifact or run file, streamed and exempt from --max-body-bytes; training data): more is a 413 before it is stored (8GiB, 500MiB, bytes)")
	fs.Var(&cfg.EntityQuota, "entity-quota", "most bytes of files (W&B, training data and trace uploads) one entity may store in all: an upload past it is a 403 before it is stored (default: no quota; hone blobs gc recounts what is stored)")
	fs.DurationVar(&cfg.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "time allowed to read request headers")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", 5*time.Minute, "time allowed to read a whole request (responses, including long streams, are not cut off)")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 2*time.Minute, "how long an idle keep-alive connection stays open")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long shutdown waits for in-flight requests")
	fs.IntVar(&cfg.MaxConcurrentKey, "max-concurrent-per-key", 128, "concurrent requests allowed per API key (0 = unlimited); more get 429")
	fs.IntVar(&cfg.MaxReadsPerKey, "max-reads-per-key", 8, "concurrent requests per API key on the routes that read stored data a small request can name a lot of (refs, objects, tables, calls, files, stored responses; 0 = unlimited); more get 429")
	cfg.RequestMemory = defaultRequestMemory
	fs.Var(&cfg.RequestMemory, "request-memory", "memory budget shared by the requests in flight on those routes: what they decode, load from the store and answer (256MiB, bytes); a request that does not fit waits up to 2 s, then gets 503 with Retry-After")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&cfg.LogFormat, "log-format", "text", "log format: text or json")
	fs.DurationVar(&cfg.BaseModelPoll, "base-model-poll", 10*time.Second, "on a PostgreSQL store, how often to look for newly registered base models to load (0: only at start)")
	fs.StringVar(&cfg.MetricsAddr, "metrics-addr", "", "serve GET /metrics (Prometheus text format) on this address, apart from the API and without a key: bind it to a private interface, e.g. 10.0.0.5:9464 (default: none)")
	fs.BoolVar(&cfg.MetricsOnAPI, "metrics-on-api", false, "also serve GET /metrics on the API port (--addr), behind an API key (Authorization: Bearer or Basic)")
	c := &cfg.Chat
	fs.Var(&c.Models, "model", "serve a Hugging Face model directory as NAME=DIR, or a GGUF file as NAME=FILE.gguf (repeatable); the first is the default")
	fs.BoolVar(&c.NoDemo, "no-demo-model", false, "do not serve the demo model (written to DATA/models/demo on first start)")
	fs.StringVar((*string)(&c.Policy), "scheduling-policy", string(inference.PolicyFCFS), "order of waiting requests: fcfs or priority (lower priority value first)")
	fs.IntVar(&c.MaxQueue, "max-queue", 256, "waiting requests per model before 429 (a text completion counts each prompt)")
	fs.IntVar(&c.MaxQueuePerKey, "max-queue-per-key", 128, "waiting sequences per model of one API key (a request counts its n, a text completion each prompt) before 429, so that other keys still get in (0: no share); a text completion asking more is a 400")
	fs.IntVar(&c.MaxRunning, "max-running", 64, "sequences in a model's running batch")
	fs.IntVar(&c.MaxBatchTokens, "max-batch-tokens", 512, "tokens per forward pass (prefill chunks and decodes)")
	c.KVMemory = byteSize(inference.DefaultKVCacheBytes)
	fs.Var(&c.KVMemory, "kv-cache-memory", "most memory each model's KV cache may hold (1GiB, 512MiB, 2GB or bytes); allocated as sequences grow, not up front; bounds the context (max_model_len) when smaller than the model's")
	fs.IntVar(&c.KVBlocks, "kv-blocks", 0, "KV cache blocks of 16 positions per model, instead of --kv-cache-memory")
	fs.Var(&c.KVDType, "kv-cache-dtype", "KV cache element type: auto (f16 for a model with quantized matrices, a quantized GGUF file or --quantize, as llama.cpp; f32 otherwise), f32 or f16 (half the memory: twice the positions in --kv-cache-memory)")
	fs.IntVar(&c.MaxModelLen, "max-model-len", 0, "longest prompt plus output of a request (default: the model's max_position_embeddings)")
	fs.BoolVar(&c.NoPrefixCache, "no-prefix-cache", false, "do not reuse cached KV blocks of earlier prompts (prefix caching is on by default)")
	fs.DurationVar(&c.ResponsesRetention, "responses-retention", 30*24*time.Hour, "how long stored responses of the Responses API are kept (previous_response_id, GET /v1/responses/{id}); 0 keeps them for ever")
	fs.IntVar(&c.MaxLogprobs, "max-logprobs", 20, "largest top_logprobs / prompt_logprobs a request may ask")
	fs.StringVar(&c.DType, "dtype", "", "weights in memory: as stored (default; a GGUF's quantized matrices stay quantized), f32 or bf16 (a GGUF's dequantized)")
	fs.StringVar(&c.Quantize, "quantize", "", "quantize the --model models' matrices at load (for serving, and for training on them: QLoRA): q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k or q6_k (the K-quants fall back as llama.cpp does for rows not a multiple of 256 long: q4_k to q5_0, q5_k to q5_1, q6_k to q8_0); a GGUF's quantized matrices stay as they are; not with --dtype")
	fs.Var(&c.Speculative, "speculative-config", `speculative decoding by prompt lookup for every request, as vLLM's flag: '{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2}' (a request's "speculative" overrides it; default: off)`)
	fs.Var(&c.ToolParsers, "tool-call-parser", "tool-call parser: hermes, llama3_json, mistral, generic or none (refuse tool_choice), for every model, or NAME=PARSER for one (repeatable); default: detected from each model's chat template, else generic")
	fs.Var(&c.ChatTemplates, "chat-template", "chat template (a Jinja file, as vLLM's flag) for every --model model, or NAME=FILE for one (repeatable): replaces the model's own, for chat and training alike; default: the model's own, else a built-in template for its family (logged at start)")
	t := &cfg.Train
	fs.IntVar(&t.Workers, "train-workers", 1, "training jobs run at once in this process (0: none; run 'hone worker' on the same store)")
	fs.StringVar(&t.DataRoot, "train-data-root", "", "directory under which local training_data_url paths are allowed (default: none)")
	fs.IntVar(&t.Rank, "lora-rank", 8, "LoRA rank of new trainable models")
	fs.Float64Var(&t.Alpha, "lora-alpha", 16, "LoRA alpha of new trainable models")
	fs.DurationVar(&t.SFTSaveEvery, "sft-save-every", training.DefaultSFTSaveEvery, "how often a running SFT job saves the state it goes on from if its worker stops (a clean shutdown always saves it; 0: only then)")
	fs.DurationVar(&t.Lease, "job-lease", 30*time.Second, "how long a training job claimed by a process that died stays claimed before another runs it (renewed every third of it while running)")
	fs.DurationVar(&t.PolicyCheck, "policy-check", 30*time.Second, "how often this node checks the models' training policies for new calls with feedback (0: never)")
	fs.IntVar(&t.MaxAttempts, "job-max-attempts", 3, "a training job fails after this many runs in a row whose worker died and that made no progress (saved no state past the furthest saved before); a run that saves further starts the count again")
	return fs
}

// envName is the environment variable of a flag.
func envName(flagName string) string {
	return "HONE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseWithEnv parses args; flags not given take their value from HONE_<NAME> when set.
func parseWithEnv(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return err
	}
	return applyEnv(fs)
}

// applyEnv sets the flags of fs not given on the command line from HONE_<NAME> when set.
func applyEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if given[f.Name] || err != nil {
			return
		}
		if v, ok := os.LookupEnv(envName(f.Name)); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("invalid %s=%q: %v", envName(f.Name), v, e)
			}
		}
	})
	return err
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("invalid --log-level %q", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, fmt.Errorf("invalid --log-format %q (text or json)", format)
	}
	return slog.New(httpx.ContextLogHandler{Handler: h}), nil
}

// InitialKeyFile is the file in the data directory holding the first-start key.
const InitialKeyFile = "initial-api-key"

// ensureInitialKey creates a key for entity `local` when the store has no key at all (the very
// first start), prints it once and writes it to DIR/initial-api-key with mode 0600.
func ensureInitialKey(ctx context.Context, keys *auth.Keys, dataDir string, out io.Writer) error {
	n, err := keys.Count(ctx)
	if err != nil || n > 0 {
		return err
	}
	// The file first: a start killed between the two leaves a file whose key is not stored,
	// and the next start (still without keys) writes a new one; never a stored key that
	// nobody was given.
	path := filepath.Join(dataDir, InitialKeyFile)
	_, secret, err := keys.CreateAfter(ctx, "local", "initial key", func(key string) error {
		return writeFileAtomic(path, []byte(key+"\n"), 0o600)
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Created an API key for entity \"local\" (also written to %s):\n%s\n", path, secret)
	return nil
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// StoreMarkerFile, in a data directory used with a PostgreSQL store, names that store (its
// DSN without the password), so that a command given the directory but no --db does not
// quietly open a separate SQLite store there.
const StoreMarkerFile = "store-postgres"

// openStore opens the data directory's store and the key service. With a PostgreSQL DSN it
// records the store in the directory (StoreMarkerFile); without a DSN, a directory so marked
// is refused with the store it belongs to.
func openStore(ctx context.Context, dataDir, dsn string) (*db.DB, *auth.Keys, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("create data directory: %w", err)
	}
	marker := filepath.Join(dataDir, StoreMarkerFile)
	switch {
	case dsn == "":
		if b, err := os.ReadFile(marker); err == nil {
			return nil, nil, fmt.Errorf("the data directory %s belongs to a server on PostgreSQL (%s): pass that store with --db (or HONE_DB), or remove %s to use a SQLite store here", dataDir, strings.TrimSpace(string(b)), marker)
		}
		dsn = filepath.Join(dataDir, "hone.db")
	case strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://"):
		if err := os.WriteFile(marker, []byte(redactDSN(dsn)+"\n"), 0o644); err != nil {
			return nil, nil, fmt.Errorf("record the store in the data directory: %w", err)
		}
	}
	d, err := db.Open(ctx, dsn)
	if err != nil {
		return nil, nil, err
	}
	st := auth.NewSQLStore(d)
	if err := st.Migrate(ctx); err != nil {
		d.Close()
		return nil, nil, err
	}
	return d, auth.NewKeys(st), nil
}

// runServe runs the server until ctx is cancelled. When ready is non-nil it receives the
// listening address once the server accepts connections.
func runServe(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- string) int {
	return runServeMode(ctx, args, stdout, stderr, ready, false)
}

// runServeMode is `hone serve`, or `hone worker` with workerOnly.
func runServeMode(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- string, workerOnly bool) int {
	var cfg ServeConfig
	cfg.WorkerOnly = workerOnly
	name, header := "serve", serveUsage
	if workerOnly {
		name, header = "worker", workerUsage
	}
	fs := newServeFlags(&cfg)
	if code, ok := flagsOnly(name, header, fs, parseWithEnv(fs, args), stdout, stderr); !ok {
		return code
	}
	logger, err := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		fmt.Fprintln(stderr, "hone serve:", err)
		return 2
	}
	if stderr == io.Writer(os.Stderr) {
		// The process's own log (not a test's buffer): what packages log without a logger of
		// their own (the engine's decode prefetch choice, package gemm) goes through it too.
		slog.SetDefault(logger)
	}
	if err := serve(ctx, cfg, logger, stdout, ready); err != nil {
		logger.Error("hone serve failed", "err", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg ServeConfig, logger *slog.Logger, stdout io.Writer, ready chan<- string) error {
	// The port first: a second server on a busy port stops before it touches the store or
	// loads a model.
	var ln net.Listener
	if !cfg.WorkerOnly {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return listenError(cfg.Addr, err)
		}
		defer ln.Close()
	}
	var mln net.Listener
	if cfg.MetricsAddr != "" {
		var err error
		if mln, err = net.Listen("tcp", cfg.MetricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr: %w", listenError(cfg.MetricsAddr, err))
		}
		defer mln.Close()
	}
	sys, err := newSystem(ctx, cfg, logger, stdout)
	if err != nil {
		return err
	}
	defer sys.close()
	if mln != nil {
		stop := serveMetrics(mln, sys.metrics.Handler(), cfg, logger)
		defer stop()
		logger.Info("metrics listening", "addr", mln.Addr().String())
		fmt.Fprintf(stdout, "Metrics on http://%s/metrics\n", mln.Addr().String())
	}
	if cfg.WorkerOnly {
		sys.startWorkers(ctx)
		logger.Info("engine kernels", gemm.LogAttrs()...)
		logger.Info("hone worker running training jobs", "data", cfg.DataDir, "store", sys.db.String(), "workers", cfg.Train.Workers, "version", version.String())
		fmt.Fprintf(stdout, "Hone %s worker: running training jobs from %s\n", version.Version, sys.db.String())
		if ready != nil {
			ready <- ""
		}
		<-ctx.Done()
		sys.stopWorkers()
		logger.Info("worker stopped")
		return nil
	}
	handler, _, err := sys.handler()
	if err != nil {
		return err
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		ReadTimeout:       cfg.ReadTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	sys.startWorkers(ctx)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	logger.Info("engine kernels", gemm.LogAttrs()...)
	logger.Info("hone listening", "addr", addr, "data", cfg.DataDir, "store", sys.db.String(), "version", version.String())
	fmt.Fprintf(stdout, "Hone %s listening on http://%s\n", version.Version, addr)
	if ready != nil {
		ready <- addr
	}

	select {
	case err := <-errc:
		sys.stopWorkers()
		return err
	case <-ctx.Done():
	}
	logger.Info("shutting down: draining in-flight requests", "timeout", cfg.ShutdownTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		logger.Warn("in-flight requests did not finish in time; closing connections", "err", err)
		_ = srv.Close()
	}
	sys.stopWorkers()
	logger.Info("server stopped")
	return nil
}

// redactDSN is a PostgreSQL URL without its password and query (which may carry one).
func redactDSN(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return "postgres://…"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	u.RawQuery = ""
	return u.String()
}

// serveMetrics serves GET /metrics (and nothing else) on ln until stop is called.
func serveMetrics(ln net.Listener, metrics http.Handler, cfg ServeConfig, logger *slog.Logger) (stop func()) {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: cfg.ReadHeaderTimeout, IdleTimeout: cfg.IdleTimeout,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	go func() { _ = srv.Serve(ln) }()
	return func() { _ = srv.Close() }
}
