package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/honeai/hone/internal/hub"
	"github.com/honeai/hone/internal/serving"
)

func init() {
	register("pull", "pull: download a model from the Hugging Face Hub (hf:OWNER/REPO) or an Ollama registry (ollama:NAME) into the cache", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runPull(ctx, args, os.Stdout, os.Stderr)
	})
}

const pullUsage = `usage: hone pull REF...
Downloads a model into the cache ($HONE_HOME/models, default ~/.cache/hone/models) and says
where it is; hone serve --model NAME=REF, hone models register NAME REF and hone export
--base-dir REF take the same references and pull what is missing. REF is one of:

  hf:OWNER/REPO[@REVISION]            a Hugging Face repository's safetensors model: config,
                                      tokenizer, chat template, generation config, the shards
                                      its index names (REVISION: a branch, tag or commit; main)
  hf:OWNER/REPO[@REVISION]:QUANT      one GGUF file of a GGUF repository, by quantization
                                      (Q4_K_M, Q8_0, ...), as llama.cpp's -hf picks it
  hf:OWNER/REPO/FILE.gguf[@REVISION]  one GGUF file by name
  ollama:[NAMESPACE/]NAME[:TAG]       a model of Ollama's registry (its GGUF layer; its
                                      template mapped to Hone's built-in one of its family)

Downloads go in parallel ranges, go on after an interruption (run the pull again), and are
checked against the SHA-256 the hub publishes. A model that huggingface_hub or Ollama already
downloaded is used where it is. Environment: HF_TOKEN (gated and private repositories),
HF_ENDPOINT, HF_HOME / HF_HUB_CACHE, HF_HUB_OFFLINE=1 or HONE_OFFLINE=1 (the caches only),
OLLAMA_MODELS, HONE_OLLAMA_REGISTRY, HTTPS_PROXY / HTTP_PROXY / NO_PROXY.
hone models list shows the cache, hone models rm REF removes a model.
`

func runPull(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("pull")
	refs, err := parseArgs(fs, args)
	if code, ok := flagError("pull", pullUsage, fs, err, stdout, stderr); !ok {
		return code
	}
	if len(refs) == 0 {
		fmt.Fprintf(stderr, "hone pull: name a model to pull\n\n%s", pullUsage)
		return 2
	}
	fail := failer("pull", stderr)
	var parsed []hub.Ref
	for _, s := range refs {
		r, err := hub.Parse(s)
		if err != nil {
			return fail(err)
		}
		parsed = append(parsed, r)
	}
	for _, r := range parsed {
		c, err := hub.FromEnv()
		if err != nil {
			return fail(err)
		}
		c.Log = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		c.Meter = &hub.Meter{}
		stop := watchPull(c.Meter, r.String(), stderr, isTerminal(stderr), nil)
		start := time.Now()
		m, err := c.Pull(ctx, r)
		stop()
		if errors.Is(err, context.Canceled) {
			return fail(fmt.Errorf("%s: interrupted; hone pull %s goes on from where it stopped", r, r))
		}
		if err != nil {
			return fail(err)
		}
		printPulled(stdout, m, time.Since(start))
	}
	return 0
}

// printPulled says what a pull got and how to serve it.
func printPulled(w io.Writer, m hub.Model, took time.Duration) {
	how := "already in the cache"
	if m.Downloaded > 0 {
		how = fmt.Sprintf("downloaded %s in %s", humanize.IBytes(uint64(m.Downloaded)), took.Round(100*time.Millisecond))
	} else if m.Cache != "hone" {
		how = "in " + m.Cache + "'s cache, used where it is"
	}
	fmt.Fprintf(w, "pulled %s (%s): %d files, %s, %s\n", m.Ref, revisionLabel(m.Revision), m.Files, humanize.IBytes(uint64(m.Bytes)), how)
	fmt.Fprintf(w, "  path: %s\n", m.Path)
	for _, n := range m.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
	if m.ChatTemplateFrom != "" {
		fmt.Fprintf(w, "  chat template: %s\n", m.ChatTemplateFrom)
	}
	fmt.Fprintf(w, "serve it: hone serve --model %s=%s\n", servedName(m.Ref), m.Ref)
}

func revisionLabel(rev string) string {
	if strings.HasPrefix(rev, "sha256:") {
		return "manifest " + rev[:min(len(rev), 19)]
	}
	return "commit " + rev[:min(len(rev), 12)]
}

// servedName suggests a --model name for a reference: the repository's or model's name,
// lower-cased.
func servedName(r hub.Ref) string {
	if r.Kind == hub.Ollama {
		return r.Name
	}
	_, name, _ := strings.Cut(r.Repo, "/")
	return strings.ToLower(strings.TrimSuffix(strings.TrimSuffix(name, "-GGUF"), "-gguf"))
}

// watchPull shows a pull's progress until the returned stop is called: a bar with the bytes,
// rate and time left redrawn on a terminal, else a line every 5 s (through log when given,
// else on w).
func watchPull(m *hub.Meter, what string, w io.Writer, tty bool, log *slog.Logger) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		every := 5 * time.Second
		if tty {
			every = 200 * time.Millisecond
		}
		t := time.NewTicker(every)
		defer t.Stop()
		rate := &rateWindow{}
		drawn := false
		for {
			select {
			case <-done:
				if drawn {
					p := m.Read()
					fmt.Fprintf(w, "\r%s\n", progressLine(p, rate.rate(time.Now(), p.Done), what))
				}
				return
			case now := <-t.C:
				p := m.Read()
				r := rate.rate(now, p.Done)
				if p.Total == 0 {
					continue
				}
				switch {
				case tty:
					fmt.Fprintf(w, "\r%s\x1b[K", progressLine(p, r, what))
					drawn = true
				case log != nil:
					log.Info("downloading", "model", what, "done_bytes", p.Done, "total_bytes", p.Total,
						"percent", fmt.Sprintf("%.1f", 100*float64(p.Done)/float64(p.Total)),
						"rate", humanize.IBytes(uint64(r))+"/s", "left", eta(p, r), "phase", p.Phase)
				default:
					fmt.Fprintf(w, "pull %s\n", progressLine(p, r, what))
				}
			}
		}
	}()
	return func() {
		close(done)
		wg.Wait()
	}
}

// progressLine is "[####....] 45% 241 MiB/538 MiB 12.3 MiB/s 24s left WHAT".
func progressLine(p hub.Progress, rate float64, what string) string {
	pct := 0.0
	if p.Total > 0 {
		pct = 100 * float64(p.Done) / float64(p.Total)
	}
	const width = 24
	fill := min(width, int(pct*width/100))
	s := fmt.Sprintf("[%s%s] %3.0f%% %s/%s %s/s %s left  %s", strings.Repeat("#", fill), strings.Repeat(".", width-fill), pct,
		humanize.IBytes(uint64(max(p.Done, 0))), humanize.IBytes(uint64(p.Total)), humanize.IBytes(uint64(rate)), eta(p, rate), what)
	if p.Phase != "" {
		s += " (" + p.Phase + ")"
	}
	return s
}

func eta(p hub.Progress, rate float64) string {
	if rate <= 0 || p.Done >= p.Total {
		if p.Done >= p.Total && p.Total > 0 {
			return "0s"
		}
		return "?"
	}
	return (time.Duration(float64(p.Total-p.Done)/rate) * time.Second).Round(time.Second).String()
}

// rateWindow is a download's rate over its last 10 seconds.
type rateWindow struct {
	at    []time.Time
	bytes []int64
}

func (r *rateWindow) rate(now time.Time, done int64) float64 {
	r.at, r.bytes = append(r.at, now), append(r.bytes, done)
	for len(r.at) > 2 && now.Sub(r.at[0]) > 10*time.Second {
		r.at, r.bytes = r.at[1:], r.bytes[1:]
	}
	dt := now.Sub(r.at[0]).Seconds()
	if dt <= 0 {
		return 0
	}
	return float64(done-r.bytes[0]) / dt
}

// pulledModel is a --model (or hone models register) path: a directory or file as given, or
// a reference's pulled model.
type pulledModel struct {
	path string
	from *hub.Model // nil: a path as given
}

// pullForServe resolves a model path that is a reference (hf:..., ollama:...): what the
// cache lacks is downloaded, its progress logged. A plain path is returned as it is.
func pullForServe(ctx context.Context, name, path string, log *slog.Logger) (pulledModel, error) {
	if !hub.IsRef(path) {
		return pulledModel{path: path}, nil
	}
	r, err := hub.Parse(path)
	if err != nil {
		return pulledModel{}, err
	}
	c, err := hub.FromEnv()
	if err != nil {
		return pulledModel{}, err
	}
	c.Log, c.Meter = log, &hub.Meter{}
	stop := watchPull(c.Meter, r.String(), io.Discard, false, log.With("for", name))
	m, err := c.Pull(ctx, r)
	stop()
	if err != nil {
		return pulledModel{}, err
	}
	for _, n := range m.Notes {
		log.Info("model "+name+": "+n, "ref", m.Ref.String())
	}
	return pulledModel{path: m.Path, from: &m}, nil
}

// loadOptions gives a pulled model's chat template (an Ollama template mapped to its family)
// to opts, where its files have none; a --chat-template still wins.
func (p pulledModel) loadOptions(opts serving.LoadOptions) serving.LoadOptions {
	if p.from != nil && p.from.ChatTemplate != "" {
		opts.ChatTemplate, opts.ChatTemplateFrom = p.from.ChatTemplate, p.from.ChatTemplateFrom
	}
	return opts
}

// reportSource says on stdout which model a name serves and where it came from.
func (s *system) reportSource(name string, p pulledModel) {
	if p.from == nil {
		fmt.Fprintf(s.stdout, "model %s: %s\n", name, p.path)
		s.log.Info("serving", "model", name, "path", p.path)
		return
	}
	m := p.from
	where := "cached in " + m.Cache + "'s cache"
	if m.Downloaded > 0 {
		where = "downloaded " + humanize.IBytes(uint64(m.Downloaded))
	}
	fmt.Fprintf(s.stdout, "model %s: %s (%s, from %s; %s) at %s\n", name, m.Ref, revisionLabel(m.Revision), m.Origin, where, m.Path)
	s.log.Info("serving", "model", name, "ref", m.Ref.String(), "revision", m.Revision, "origin", m.Origin, "path", m.Path, "cache", m.Cache)
}

// pullPath resolves a model path that may be a reference, for the commands that take one
// (hone models register, hone export --base-dir), showing progress on w.
func pullPath(ctx context.Context, path string, w io.Writer) (string, error) {
	if !hub.IsRef(path) {
		return path, nil
	}
	r, err := hub.Parse(path)
	if err != nil {
		return "", err
	}
	c, err := hub.FromEnv()
	if err != nil {
		return "", err
	}
	c.Log = slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
	c.Meter = &hub.Meter{}
	stop := watchPull(c.Meter, r.String(), w, isTerminal(w), nil)
	m, err := c.Pull(ctx, r)
	stop()
	if err != nil {
		return "", err
	}
	return m.Path, nil
}

const modelsCacheUsage = `usage:
  hone models list        the models in the cache ($HONE_HOME/models) and in huggingface_hub's
                          and Ollama's caches, with their sizes
  hone models rm REF...   remove models from Hone's cache (hone models list shows their REFs)
`

// runModelsList is `hone models list`.
func runModelsList(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("models list")
	if code, ok := flagsOnly("models list", modelsCacheUsage, fs, fs.Parse(args), stdout, stderr); !ok {
		return code
	}
	fail := failer("models list", stderr)
	c, err := hub.FromEnv()
	if err != nil {
		return fail(err)
	}
	list, err := c.List()
	if err != nil {
		return fail(err)
	}
	if len(list) == 0 {
		fmt.Fprintf(stdout, "no models in %s (nor in huggingface_hub's or Ollama's caches): hone pull REF downloads one\n", c.Dir)
		return 0
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "REF\tSIZE\tREVISION\tCACHE\tMODIFIED\tPATH")
	var total int64
	for _, e := range list {
		rev := e.Revision
		if strings.HasPrefix(rev, "sha256:") {
			rev = rev[:min(len(rev), 19)]
		} else {
			rev = rev[:min(len(rev), 12)]
		}
		ref := e.Ref
		if e.Incomplete {
			ref += " (unfinished: hone pull goes on, hone models rm drops it)"
		}
		mod := ""
		if !e.Modified.IsZero() {
			mod = humanize.Time(e.Modified)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", ref, humanize.IBytes(uint64(e.Bytes)), rev, e.Cache, mod, e.Path)
		if e.Cache == "hone" {
			total += e.Bytes
		}
	}
	tw.Flush()
	fmt.Fprintf(stdout, "Hone's cache: %s in %s\n", humanize.IBytes(uint64(total)), c.Dir)
	return 0
}

// runModelsRm is `hone models rm REF...`.
func runModelsRm(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("models rm")
	refs, err := parseArgs(fs, args)
	if code, ok := flagError("models rm", modelsCacheUsage, fs, err, stdout, stderr); !ok {
		return code
	}
	if len(refs) == 0 {
		fmt.Fprintf(stderr, "hone models rm: name a model (hone models list shows them)\n\n%s", modelsCacheUsage)
		return 2
	}
	fail := failer("models rm", stderr)
	c, err := hub.FromEnv()
	if err != nil {
		return fail(err)
	}
	for _, s := range refs {
		r, err := hub.Parse(s)
		if err != nil {
			return fail(err)
		}
		n, err := c.Remove(r)
		if err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "removed %s (%s freed)\n", r, humanize.IBytes(uint64(n)))
	}
	return 0
}
