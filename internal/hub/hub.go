// Package hub pulls models as users get them: from the Hugging Face Hub (hf:OWNER/REPO, a
// repository's safetensors model or one GGUF file of it) and from an Ollama registry
// (ollama:NAME[:TAG]), into a cache that keeps each source's own layout, so that each
// source's tools read it and Hone reads theirs:
//
//	$HONE_HOME/models/hub/models--OWNER--REPO/{blobs,snapshots,refs}   as huggingface_hub writes
//	$HONE_HOME/models/ollama/{blobs,manifests}                        as Ollama writes
//
// A model that huggingface_hub (HF_HUB_CACHE, HF_HOME) or Ollama (OLLAMA_MODELS) already
// downloaded is used where it is. Downloads go in parallel ranges, go on after an
// interruption, are checked against the SHA-256 the hub or registry publishes (the LFS oid,
// the layer digest) and moved into place only when whole; a Meter reports their progress.
//
// Usage:
//
//	c, err := hub.FromEnv()
//	ref, err := hub.Parse("hf:HuggingFaceTB/SmolLM2-135M-Instruct")
//	m, err := c.Pull(ctx, ref) // m.Path: a directory or a .gguf file that model.Load reads
//
// The package knows nothing of serving; cmd/hone resolves references wherever a model path
// is taken (hone pull, --model NAME=REF, hone models register).
package hub

import (
	"cmp"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpproxy"

	"github.com/honeai/hone/internal/version"
)

// Client pulls models into a cache. The zero value is not usable: use FromEnv, or set Dir
// and the endpoints.
type Client struct {
	// Dir is Hone's cache ($HONE_HOME/models).
	Dir string
	// HFEndpoint is the Hugging Face Hub's base URL (HF_ENDPOINT; https://huggingface.co).
	HFEndpoint string
	// HFToken is sent to HFEndpoint's host only (HF_TOKEN, or huggingface_hub's token file).
	HFToken string
	// HFCache is huggingface_hub's cache, read where a model is already there ("": none).
	HFCache string
	// OllamaRegistry is the base URL of the default Ollama registry host
	// (HONE_OLLAMA_REGISTRY; https://registry.ollama.ai); other hosts are asked over https.
	OllamaRegistry string
	// OllamaCache is Ollama's models directory, read where a model is already there.
	OllamaCache string
	// Offline takes models from the caches only (HONE_OFFLINE); HFOffline does for hf:
	// references (HF_HUB_OFFLINE).
	Offline, HFOffline bool
	// HTTP sends the requests; FromEnv's honours HTTPS_PROXY, HTTP_PROXY and NO_PROXY.
	HTTP *http.Client
	// Connections is how many ranges of one large file are downloaded at once (default 4);
	// Files how many files at once (default 2).
	Connections, Files int
	// ParallelMin is the size from which a file is downloaded in ranges (default 32 MiB);
	// ChunkSize the size of each range (0: chosen from the file's size).
	ParallelMin, ChunkSize int64
	// Retries is how many times in a row a request is sent without progress before the pull
	// fails (default 6); Backoff the first wait between them (default 500 ms, doubled each
	// time; a Retry-After header wins).
	Retries int
	Backoff time.Duration
	// Meter counts the bytes of a pull for a progress display (nil: none).
	Meter *Meter
	// Log receives what a pull decides and retries (nil: discarded).
	Log *slog.Logger

	freeSpace func(dir string) (int64, error)           // test hook: the disk's free bytes
	writeHook func(name string, off int64, n int) error // test hook: fail a write

	regMu     sync.Mutex
	regTokens map[string]string // registry host → anonymous bearer token
}

// FromEnv returns a client configured as the environment says: HONE_HOME (default
// ~/.cache/hone), HF_ENDPOINT, HF_TOKEN (or HF_TOKEN_PATH / $HF_HOME/token, as huggingface_hub
// reads it), HF_HUB_CACHE / HF_HOME, HF_HUB_OFFLINE, HONE_OFFLINE, OLLAMA_MODELS,
// HONE_OLLAMA_REGISTRY, and the proxy variables.
func FromEnv() (*Client, error) {
	home := os.Getenv("HONE_HOME")
	if home == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return nil, err
		}
		home = filepath.Join(cache, "hone")
	}
	userHome, _ := os.UserHomeDir()
	hfHome := os.Getenv("HF_HOME")
	if hfHome == "" {
		xdg := os.Getenv("XDG_CACHE_HOME")
		if xdg == "" && userHome != "" {
			xdg = filepath.Join(userHome, ".cache")
		}
		hfHome = filepath.Join(xdg, "huggingface")
	}
	hfCache := cmp.Or(os.Getenv("HF_HUB_CACHE"), os.Getenv("HUGGINGFACE_HUB_CACHE"), filepath.Join(hfHome, "hub"))
	token := strings.TrimSpace(cmp.Or(os.Getenv("HF_TOKEN"), os.Getenv("HUGGING_FACE_HUB_TOKEN")))
	if token == "" {
		if b, err := os.ReadFile(cmp.Or(os.Getenv("HF_TOKEN_PATH"), filepath.Join(hfHome, "token"))); err == nil {
			token = strings.TrimSpace(string(b))
		}
	}
	ollama := os.Getenv("OLLAMA_MODELS")
	if ollama == "" && userHome != "" {
		ollama = filepath.Join(userHome, ".ollama", "models")
	}
	proxy := httpproxy.FromEnvironment().ProxyFunc()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = func(r *http.Request) (*url.URL, error) { return proxy(r.URL) }
	tr.ResponseHeaderTimeout = time.Minute
	c := &Client{
		Dir:            filepath.Join(home, "models"),
		HFEndpoint:     strings.TrimRight(cmp.Or(os.Getenv("HF_ENDPOINT"), "https://huggingface.co"), "/"),
		HFToken:        token,
		HFCache:        hfCache,
		OllamaRegistry: strings.TrimRight(cmp.Or(os.Getenv("HONE_OLLAMA_REGISTRY"), "https://"+DefaultHost), "/"),
		OllamaCache:    ollama,
		Offline:        truthy(os.Getenv("HONE_OFFLINE")),
		HFOffline:      truthy(os.Getenv("HF_HUB_OFFLINE")),
		HTTP:           &http.Client{Transport: tr},
	}
	return c, nil
}

// truthy reads an environment switch as huggingface_hub does (1, ON, YES, TRUE).
func truthy(v string) bool {
	switch strings.ToUpper(strings.TrimSpace(v)) {
	case "1", "ON", "YES", "TRUE":
		return true
	}
	return false
}

func (c *Client) log() *slog.Logger {
	if c.Log == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return c.Log
}

func (c *Client) connections() int { return cmp.Or(max(c.Connections, 0), 4) }
func (c *Client) files() int       { return cmp.Or(max(c.Files, 0), 2) }
func (c *Client) retries() int     { return cmp.Or(max(c.Retries, 0), 6) }
func (c *Client) parallelMin() int64 {
	return cmp.Or(max(c.ParallelMin, 0), 32<<20)
}
func (c *Client) userAgent() string { return "hone/" + version.Version }

// hfDir is Hone's copy of the Hugging Face cache layout; ollamaDir of Ollama's.
func (c *Client) hfDir() string     { return filepath.Join(c.Dir, "hub") }
func (c *Client) ollamaDir() string { return filepath.Join(c.Dir, "ollama") }

func sameHost(a, b string) bool {
	ua, err1 := url.Parse(a)
	ub, err2 := url.Parse(b)
	return err1 == nil && err2 == nil && ua.Host != "" && strings.EqualFold(ua.Host, ub.Host)
}

func hostOf(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	return u
}

// Model is a pulled model: where it is and where it came from.
type Model struct {
	Ref Ref
	// Path is what model.Load reads: a Hugging Face directory or a .gguf file.
	Path string
	// Revision is the commit (hf:) or the manifest's digest (ollama:).
	Revision string
	// Cache names whose cache holds it: "hone", "huggingface_hub" or "ollama".
	Cache string
	// Origin says where it was downloaded from (a repository URL, a registry's manifest).
	Origin string
	// Files and Bytes count what the model is made of; Downloaded what this pull fetched.
	Files      int
	Bytes      int64
	Downloaded int64
	// ChatTemplate is a chat template to use when the model's files carry none (an Ollama
	// model's template, mapped to Hone's built-in one of its family), and ChatTemplateFrom
	// says so; empty otherwise.
	ChatTemplate, ChatTemplateFrom string
	// Notes are what the pull chose or left out, for the user.
	Notes []string
}

// Meter counts a pull's bytes for a progress display; its methods may be called on nil.
type Meter struct {
	total, done, resumed atomic.Int64
	mu                   sync.Mutex
	phase                string
}

// Progress is a Meter's reading: bytes downloaded (those an earlier pull left included),
// the bytes to download in all (0: not known yet), those found from an earlier pull, and
// what is being done besides downloading ("checking FILE").
type Progress struct {
	Done, Total, Resumed int64
	Phase                string
}

// Read returns the meter's counts.
func (m *Meter) Read() Progress {
	if m == nil {
		return Progress{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return Progress{Done: m.done.Load(), Total: m.total.Load(), Resumed: m.resumed.Load(), Phase: m.phase}
}

func (m *Meter) add(n int64) {
	if m != nil {
		m.done.Add(n)
	}
}

func (m *Meter) plan(total, resumed int64) {
	if m != nil {
		m.total.Add(total)
		m.done.Add(resumed)
		m.resumed.Add(resumed)
	}
}

func (m *Meter) setPhase(s string) {
	if m != nil {
		m.mu.Lock()
		m.phase = s
		m.mu.Unlock()
	}
}
