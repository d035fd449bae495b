package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/health"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/openapi"
	"github.com/honeai/hone/internal/version"
)

func init() {
	register("serve", "start the Hone server (chat completions, training API, trace store)", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runServe(ctx, args, os.Stdout, os.Stderr, nil)
	})
}

// ServeConfig is the configuration of `hone serve`.
type ServeConfig struct {
	// WorkerOnly runs the areas without listening (`hone worker`): training jobs only.
	WorkerOnly        bool
	Addr              string
	DataDir           string
	DSN               string
	MaxBodyBytes      int64
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	IdleTimeout       time.Duration
	ShutdownTimeout   time.Duration
	MaxConcurrentKey  int
	LogLevel          string
	LogFormat         string
}

// App is what areas get to wire themselves into the server.
type App struct {
	Config  ServeConfig
	DB      *db.DB
	DataDir string
	Logger  *slog.Logger
	Keys    *auth.Keys
	Checks  *health.Checks
	// Bearer and Basic authenticate the training and tracing areas (with the per-key limit).
	Bearer, Basic httpx.Middleware
	// Stdout is where messages for the user go (the first-start key, the listen address).
	Stdout io.Writer

	ctx        context.Context
	mu         sync.Mutex
	services   map[string]any
	onShutdown []func(context.Context) error
}

// Context is the server's lifetime context (cancelled when shutdown starts).
func (a *App) Context() context.Context {
	if a.ctx == nil {
		return context.Background()
	}
	return a.ctx
}

// Provide shares a service with areas wired after this one.
func (a *App) Provide(name string, v any) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.services == nil {
		a.services = map[string]any{}
	}
	a.services[name] = v
}

// Lookup returns a service provided by an earlier area.
func (a *App) Lookup(name string) (any, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	v, ok := a.services[name]
	return v, ok
}

// OnShutdown runs fn when the server stops, after in-flight requests drained and before the
// store closes; hooks run in reverse order of registration.
func (a *App) OnShutdown(fn func(context.Context) error) {
	a.mu.Lock()
	a.onShutdown = append(a.onShutdown, fn)
	a.mu.Unlock()
}

// area is one part of the HTTP interface, registered from its own file.
type area struct {
	order int
	name  string
	wire  func(app *App, r *httpx.Router) error
}

var (
	areas      []area
	serveFlags []func(fs *flag.FlagSet)
)

// registerArea adds an area to `hone serve`; areas are wired in ascending order (trace 10,
// chat 20, training 30, ...), so an area can Lookup services of lower-ordered ones.
func registerArea(order int, name string, wire func(app *App, r *httpx.Router) error) {
	areas = append(areas, area{order, name, wire})
}

// registerServeFlags lets an area add flags to `hone serve`. Every flag also reads the
// environment variable HONE_<NAME> (dashes become underscores) when not given.
func registerServeFlags(fn func(fs *flag.FlagSet)) { serveFlags = append(serveFlags, fn) }

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
	fs.DurationVar(&cfg.ReadHeaderTimeout, "read-header-timeout", 10*time.Second, "time allowed to read request headers")
	fs.DurationVar(&cfg.ReadTimeout, "read-timeout", 5*time.Minute, "time allowed to read a whole request (responses, including long streams, are not cut off)")
	fs.DurationVar(&cfg.IdleTimeout, "idle-timeout", 2*time.Minute, "how long an idle keep-alive connection stays open")
	fs.DurationVar(&cfg.ShutdownTimeout, "shutdown-timeout", 30*time.Second, "how long shutdown waits for in-flight requests")
	fs.IntVar(&cfg.MaxConcurrentKey, "max-concurrent-per-key", 128, "concurrent requests allowed per API key (0 = unlimited); more get 429")
	fs.StringVar(&cfg.LogLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&cfg.LogFormat, "log-format", "text", "log format: text or json")
	for _, fn := range serveFlags {
		fn(fs)
	}
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
	_, secret, err := keys.Create(ctx, "local", "initial key")
	if err != nil {
		return err
	}
	path := filepath.Join(dataDir, InitialKeyFile)
	if err := writeFileAtomic(path, []byte(secret+"\n"), 0o600); err != nil {
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

// openStore opens the data directory's store and the key service.
func openStore(ctx context.Context, dataDir, dsn string) (*db.DB, *auth.Keys, error) {
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("create data directory: %w", err)
	}
	if dsn == "" {
		dsn = filepath.Join(dataDir, "hone.db")
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

// buildHandler assembles the whole HTTP handler of app.
func buildHandler(app *App) (http.Handler, *httpx.Router, error) {
	r := httpx.NewRouter()
	health.Register(r, app.Checks, app.Bearer, version.Version)
	sorted := append([]area(nil), areas...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].order < sorted[j].order })
	for _, a := range sorted {
		if err := a.wire(app, r); err != nil {
			return nil, nil, fmt.Errorf("wire %s: %w", a.name, err)
		}
	}
	var (
		docOnce sync.Once
		doc     []byte
		docErr  error
	)
	r.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, req *http.Request) {
		docOnce.Do(func() {
			doc, docErr = openapi.Build(openapi.Info{
				Title:       "Hone",
				Version:     version.Version,
				Description: "Chat completions (OpenAI/vLLM-compatible), training (W&B Training / ART payloads) and tracing (Weave-compatible).",
			}, r.Routes())
		})
		if docErr != nil {
			httpx.WriteJSON(w, http.StatusInternalServerError, nil)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(doc)
	}, &openapi.Operation{Summary: "OpenAPI 3.1 document of every route", Tags: []string{"service"}})

	h := httpx.Chain(r,
		httpx.WithRequestID(),
		httpx.AccessLog(app.Logger),
		httpx.Recover(app.Logger),
		httpx.LimitBody(app.Config.MaxBodyBytes),
	)
	return h, r, nil
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
	if code, ok := flagError(name, header, fs, parseWithEnv(fs, args), stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "hone %s: unexpected argument %q\nRun 'hone %s --help' for its flags.\n", name, fs.Arg(0), name)
		return 2
	}
	logger, err := newLogger(stderr, cfg.LogLevel, cfg.LogFormat)
	if err != nil {
		fmt.Fprintln(stderr, "hone serve:", err)
		return 2
	}
	if err := serve(ctx, cfg, logger, stdout, ready); err != nil {
		logger.Error("hone serve failed", "err", err)
		return 1
	}
	return 0
}

func serve(ctx context.Context, cfg ServeConfig, logger *slog.Logger, stdout io.Writer, ready chan<- string) error {
	store, keys, err := openStore(ctx, cfg.DataDir, cfg.DSN)
	if err != nil {
		return err
	}
	app := &App{ctx: ctx, Config: cfg, DB: store, DataDir: cfg.DataDir, Logger: logger, Keys: keys, Checks: health.NewChecks(), Stdout: stdout}
	defer func() {
		if err := store.Close(); err != nil {
			logger.Error("closing the store", "err", err)
		} else {
			logger.Info("store closed")
		}
	}()
	app.Checks.Register("database", func(ctx context.Context) (map[string]any, error) {
		return map[string]any{"dialect": store.Dialect().String()}, store.Ping(ctx)
	})
	limiter := httpx.NewKeyLimiter(cfg.MaxConcurrentKey)
	app.Bearer = httpx.Authenticate(keys, auth.Bearer, limiter)
	app.Basic = httpx.Authenticate(keys, auth.Basic, limiter)

	if !cfg.WorkerOnly {
		if err := ensureInitialKey(ctx, keys, cfg.DataDir, stdout); err != nil {
			return fmt.Errorf("initial API key: %w", err)
		}
	}
	handler, _, err := buildHandler(app)
	if err != nil {
		return err
	}
	if cfg.WorkerOnly {
		logger.Info("hone worker running training jobs", "data", cfg.DataDir, "store", store.String(), "workers", trainCfg.workers, "version", version.String())
		fmt.Fprintf(stdout, "Hone %s worker: running training jobs from %s\n", version.Version, store.String())
		if ready != nil {
			ready <- ""
		}
		<-ctx.Done()
		app.runShutdownHooks(context.Background())
		logger.Info("worker stopped")
		return nil
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return listenError(cfg.Addr, err)
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
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	addr := ln.Addr().String()
	logger.Info("hone listening", "addr", addr, "data", cfg.DataDir, "store", store.String(), "version", version.String())
	fmt.Fprintf(stdout, "Hone %s listening on http://%s\n", version.Version, addr)
	if ready != nil {
		ready <- addr
	}

	select {
	case err := <-errc:
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
	app.runShutdownHooks(sctx)
	logger.Info("server stopped")
	return nil
}

// runShutdownHooks runs the areas' shutdown hooks, last registered first.
func (a *App) runShutdownHooks(ctx context.Context) {
	a.mu.Lock()
	hooks := append([]func(context.Context) error(nil), a.onShutdown...)
	a.mu.Unlock()
	for i := len(hooks) - 1; i >= 0; i-- {
		if err := hooks[i](ctx); err != nil {
			a.Logger.Error("shutdown hook failed", "err", err)
		}
	}
}
