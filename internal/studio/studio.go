// Package studio serves Hone Studio, the web UI of `hone serve`: a single-page application of
// plain ES modules embedded in the binary (no network access at run time), a thin client of
// the public APIs (chat and training under /v1 with Bearer, the trace routes with Basic).
//
// Routes: `GET /` and the UI's own paths (below) answer index.html; the assets are under
// `/studio/<hash>/static/…`, where <hash> is a digest of every embedded asset, so they are cached as
// immutable and a new binary's assets have new URLs. index.html itself is never cached.
// Unknown paths outside the UI's keep the router's JSON 404.
//
//	r := httpx.NewRouter()
//	studio.Register(r)
//
// The paths the Weave SDK prints after `weave.init` open the project and the call:
// `/<entity>/<project>/weave` and `/<entity>/<project>/r/call/<id>`.
package studio

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strings"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/openapi"
)

//go:embed assets
var embedded embed.FS

// Pages are the UI's path patterns (ServeMux syntax) that answer index.html. The project
// pages (ProjectPages, under /{entity}/{project}/) are one least-specific pattern, so that
// no API route of three or more segments (W&B's /artifacts/{entity}/{md5}) can clash with
// them; any other path under it is the API's JSON 404.
var Pages = []string{
	"/{$}",
	"/playground",
}

// ProjectPages are the UI's pages under /{entity}/{project}/: a page is its first segment
// alone or, when it ends in "/", the segment and anything after it.
var ProjectPages = []string{"weave", "weave/", "r/call/", "training", "training/"}

// isProjectPage reports whether rest (what follows /{entity}/{project}/) is a UI page.
func isProjectPage(rest string) bool {
	for _, p := range ProjectPages {
		if rest == p || strings.HasSuffix(p, "/") && strings.HasPrefix(rest, p) && len(rest) > len(p) {
			return true
		}
	}
	return false
}

// Router is what Register needs from the router (httpx.Router).
type Router interface {
	HandleFunc(pattern string, h http.HandlerFunc, op *openapi.Operation)
}

// Assets are the embedded files with their content types and the digest over all of them.
type Assets struct {
	files map[string][]byte // path under assets/ → bytes
	hash  string            // first 12 hex digits of SHA-256 over names and contents
	index []byte            // index.html with the asset prefix filled in
}

// Load reads the embedded assets.
func Load() (*Assets, error) {
	sub, err := fs.Sub(embedded, "assets")
	if err != nil {
		return nil, err
	}
	a := &Assets{files: map[string][]byte{}}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		a.files[p] = b
		return err
	})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(a.files))
	for n := range a.files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(a.files[n])
	}
	a.hash = hex.EncodeToString(h.Sum(nil))[:12]
	a.index = bytes.ReplaceAll(a.files["index.html"], []byte("{{ASSETS}}"), []byte(a.Prefix()))
	return a, nil
}

// Prefix is the URL path under which the assets are served ("/studio/<hash>/static/"). The
// literal third segment keeps the pattern apart from the pages' `/{entity}/{project}/weave/…`
// in ServeMux (a project may well be named "studio").
func (a *Assets) Prefix() string { return "/studio/" + a.hash + "/static/" }

// Names lists the embedded asset paths.
func (a *Assets) Names() []string {
	out := make([]string, 0, len(a.files))
	for n := range a.files {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// csp allows nothing but this origin: the UI loads no code, style or font from elsewhere.
const csp = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'"

// contentType is the Content-Type of an asset by its extension.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".svg":
		return "image/svg+xml"
	case ".png":
		return "image/png"
	case ".json":
		return "application/json"
	default:
		return "text/plain; charset=utf-8"
	}
}

// ServeIndex answers index.html, never cached (it names the current assets).
func (a *Assets) ServeIndex(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(a.index)
}

// ServeAsset answers /studio/{hash}/static/{file...}: an asset of this build, cached as immutable;
// another build's hash or an unknown file is a 404.
func (a *Assets) ServeAsset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	b, ok := a.files[name]
	if r.PathValue("hash") != a.hash || !ok || name == "index.html" {
		apierror.WriteError(w, apierror.NotFound("", "Not Found: no asset %s of this build", r.URL.Path))
		return
	}
	h := w.Header()
	h.Set("Content-Type", contentType(name))
	h.Set("Cache-Control", "public, max-age=31536000, immutable")
	h.Set("ETag", `"`+a.hash+`"`)
	h.Set("X-Content-Type-Options", "nosniff")
	if strings.Contains(r.Header.Get("If-None-Match"), a.hash) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(b)
}

// Register adds the UI's pages and assets to r. No authentication: the UI's code is public,
// and every request it makes carries the key the user signs in with.
func Register(r Router) error {
	a, err := Load()
	if err != nil {
		return err
	}
	doc := func(s string) *openapi.Operation { return &openapi.Operation{Summary: s, Tags: []string{"studio"}} }
	for _, p := range Pages {
		r.HandleFunc("GET "+p, a.ServeIndex, doc("Hone Studio (web UI) page"))
	}
	r.HandleFunc("GET /{entity}/{project}/{rest...}", func(w http.ResponseWriter, req *http.Request) {
		if !isProjectPage(req.PathValue("rest")) {
			apierror.WriteError(w, apierror.NotFound("", "Not Found: no route for %s %s", req.Method, req.URL.Path))
			return
		}
		a.ServeIndex(w, req)
	}, doc("Hone Studio (web UI) project page: weave, weave/..., r/call/{id}, training, training/..."))
	r.HandleFunc("GET /studio/{hash}/static/{file...}", a.ServeAsset, doc("Hone Studio asset (immutable, named by the build's asset digest)"))
	return nil
}
