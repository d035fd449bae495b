package apierror

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/honeai/hone/"

// belowHTTP are the packages under the HTTP layer: services, engine and store. They return
// faults (internal/fault) or sentinel errors, and the HTTP layer maps them at the edge.
var belowHTTP = []string{
	// services
	"internal/trace", "internal/auth", "internal/training", "internal/registry",
	"internal/jobs", "internal/serving", "internal/inference", "internal/wandb",
	// engine, store and shared
	"internal/structured", "internal/model", "internal/kvcache", "internal/train", "internal/trainingdata",
	"internal/sample",
	"internal/tokenizer", "internal/chattemplate", "internal/safetensors", "internal/gemm",
	"internal/kernels", "internal/synth", "internal/db", "internal/pyjson", "internal/fault",
}

// httpOnly may be imported only by the HTTP layer and cmd/hone.
var httpOnly = map[string]bool{
	module + "internal/apierror": true,
	module + "internal/httpx":    true,
}

// imports lists the imports of the non-test files of the module package path that build
// for this platform.
func imports(t *testing.T, root, path string) []string {
	t.Helper()
	p, err := build.ImportDir(filepath.Join(root, strings.TrimPrefix(path, module)), 0)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return p.Imports
}

// offending walks the module packages path imports, directly or not, and returns the first
// chain that reaches an HTTP-only package or net/http.
func offending(t *testing.T, root, path string) []string {
	seen := map[string]bool{}
	var walk func(chain []string) []string
	walk = func(chain []string) []string {
		pkg := chain[len(chain)-1]
		if seen[pkg] {
			return nil
		}
		seen[pkg] = true
		for _, imp := range imports(t, root, pkg) {
			next := append(append([]string(nil), chain...), imp)
			if httpOnly[imp] || imp == "net/http" || strings.HasPrefix(imp, "net/http/") {
				return next
			}
			if strings.HasPrefix(imp, module) {
				if bad := walk(next); bad != nil {
					return bad
				}
			}
		}
		return nil
	}
	return walk([]string{path})
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test")
		}
		dir = parent
	}
}

// TestNoHTTPBelowTheHTTPLayer: services, engine and store know nothing of HTTP. They do not
// import internal/apierror, internal/httpx or net/http, not even through another package of
// the module; their errors are faults that apierror.As maps at the edge. (A service that some
// day needs an HTTP client should get it through an interface, not by importing net/http.)
func TestNoHTTPBelowTheHTTPLayer(t *testing.T) {
	root := moduleRoot(t)
	for _, p := range belowHTTP {
		if bad := offending(t, root, module+p); bad != nil {
			t.Errorf("%s reaches the HTTP layer: %s", p, strings.Join(bad, " -> "))
		}
	}
	// The check sees what it should: the HTTP layer does import these.
	if bad := offending(t, root, module+"internal/traceapi"); bad == nil {
		t.Error("the check found no HTTP import in internal/traceapi")
	}
}
