// Package hubtest serves models over HTTP on loopback as the Hugging Face Hub and an Ollama
// registry do, for tests of internal/hub's real download code: the hub's revision API and
// resolve URLs (ETag, X-Linked-Etag, X-Linked-Size, X-Repo-Commit, redirects of LFS files to
// a CDN path, X-Error-Code answers), the registry's manifests and blob redirects, and ranged
// downloads from the CDN path; with faults to inject (a cut connection, altered bytes, 429s).
//
// Usage:
//
//	srv := hubtest.New(t)
//	srv.AddRepo("owner/repo", map[string]string{"config.json": "/path/to/config.json", ...})
//	t.Setenv("HF_ENDPOINT", srv.URL)
//	srv.AddOllama("library/name", "tag", []hubtest.Layer{{MediaType: hubtest.MediaModel, Path: "x.gguf"}})
//	t.Setenv("HONE_OLLAMA_REGISTRY", srv.URL)
package hubtest

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Media types of an Ollama manifest's layers.
const (
	MediaModel    = "application/vnd.ollama.image.model"
	MediaTemplate = "application/vnd.ollama.image.template"
	MediaParams   = "application/vnd.ollama.image.params"
	MediaSystem   = "application/vnd.ollama.image.system"
	MediaLicense  = "application/vnd.ollama.image.license"
	MediaAdapter  = "application/vnd.ollama.image.adapter"
)

// Server is the hub and the registry on one loopback listener.
type Server struct {
	*httptest.Server
	// Token, when set, is the one token the hub accepts for gated and private repositories.
	Token string

	mu      sync.Mutex
	repos   map[string]*Repo
	renamed map[string]string
	blobs   map[string]*blob // by sha256 hex
	ollama  map[string]map[string][]byte
	log     []string
	cut     map[string]int64 // sha256 → cut the next answer after this many bytes
	corrupt map[string]bool
	tooMany int
	sent    atomic.Int64
}

// Repo is a repository of the hub.
type Repo struct {
	Name string
	// Commit is its one commit; Branches name it ("main").
	Commit   string
	Branches map[string]string
	Gated    bool
	Private  bool
	files    map[string]*blob
}

type blob struct {
	path    string // on disk, or
	data    []byte
	size    int64
	sha256  string
	gitSHA1 string
	lfs     bool
}

func (b *blob) open() (io.ReadSeeker, func(), error) {
	if b.path == "" {
		return bytes.NewReader(b.data), func() {}, nil
	}
	f, err := os.Open(b.path)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}

var sums sync.Map // path → [2]string{sha256, gitsha1}, computed once per test binary

func newBlob(path string, data []byte) (*blob, error) {
	b := &blob{path: path, data: data}
	if path != "" {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		b.size = fi.Size()
		key := fmt.Sprintf("%s|%d|%d", path, fi.Size(), fi.ModTime().UnixNano())
		if v, ok := sums.Load(key); ok {
			s := v.([2]string)
			b.sha256, b.gitSHA1 = s[0], s[1]
		} else {
			f, err := os.Open(path)
			if err != nil {
				return nil, err
			}
			h256, h1 := sha256.New(), sha1.New()
			fmt.Fprintf(h1, "blob %d\x00", b.size)
			_, err = io.Copy(io.MultiWriter(h256, h1), f)
			f.Close()
			if err != nil {
				return nil, err
			}
			b.sha256, b.gitSHA1 = hex.EncodeToString(h256.Sum(nil)), hex.EncodeToString(h1.Sum(nil))
			sums.Store(key, [2]string{b.sha256, b.gitSHA1})
		}
	} else {
		b.size = int64(len(data))
		s := sha256.Sum256(data)
		b.sha256 = hex.EncodeToString(s[:])
		h1 := sha1.New()
		fmt.Fprintf(h1, "blob %d\x00", b.size)
		h1.Write(data)
		b.gitSHA1 = hex.EncodeToString(h1.Sum(nil))
	}
	return b, nil
}

// New starts a server; it stops at the end of the test.
func New(t testing.TB) *Server {
	s := &Server{repos: map[string]*Repo{}, renamed: map[string]string{}, blobs: map[string]*blob{},
		ollama: map[string]map[string][]byte{}, cut: map[string]int64{}, corrupt: map[string]bool{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

// AddRepo adds a repository whose files (repository path → file on disk) are at one commit
// on branch main. Files larger than 1 MiB and weights are LFS files, as on the hub.
func (s *Server) AddRepo(t testing.TB, name string, files map[string]string) *Repo {
	t.Helper()
	return s.addRepo(t, name, files, nil)
}

// AddRepoData adds a repository of files given by their contents.
func (s *Server) AddRepoData(t testing.TB, name string, files map[string][]byte) *Repo {
	t.Helper()
	return s.addRepo(t, name, nil, files)
}

func (s *Server) addRepo(t testing.TB, name string, paths map[string]string, data map[string][]byte) *Repo {
	r := &Repo{Name: name, Branches: map[string]string{}, files: map[string]*blob{}}
	h := sha1.New()
	h.Write([]byte(name))
	add := func(p string, b *blob) {
		ext := p[strings.LastIndexByte(p, '.')+1:]
		b.lfs = b.size > 1<<20 || ext == "safetensors" || ext == "gguf" || ext == "bin"
		r.files[p] = b
		h.Write([]byte(p + b.sha256))
	}
	names := make([]string, 0, len(paths)+len(data))
	for p := range paths {
		names = append(names, p)
	}
	for p := range data {
		names = append(names, p)
	}
	sort.Strings(names)
	for _, p := range names {
		var b *blob
		var err error
		if src, ok := paths[p]; ok {
			b, err = newBlob(src, nil)
		} else {
			b, err = newBlob("", data[p])
		}
		if err != nil {
			t.Fatal(err)
		}
		add(p, b)
	}
	r.Commit = hex.EncodeToString(h.Sum(nil))
	r.Branches["main"] = r.Commit
	s.mu.Lock()
	defer s.mu.Unlock()
	s.repos[name] = r
	for _, b := range r.files {
		s.blobs[b.sha256] = b
	}
	return r
}

// Rename makes old a former name of the repository new: the hub redirects to it.
func (s *Server) Rename(old, new string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.renamed[old] = new
}

// Layer is one layer of an Ollama manifest: a file on disk or its contents.
type Layer struct {
	MediaType string
	Path      string
	Data      []byte
}

// AddOllama adds NAMESPACE/NAME:TAG to the registry.
func (s *Server) AddOllama(t testing.TB, name, tag string, layers []Layer) {
	t.Helper()
	type ml struct {
		MediaType string `json:"mediaType"`
		Digest    string `json:"digest"`
		Size      int64  `json:"size"`
	}
	var out []ml
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range layers {
		b, err := newBlob(l.Path, l.Data)
		if err != nil {
			t.Fatal(err)
		}
		s.blobs[b.sha256] = b
		out = append(out, ml{l.MediaType, "sha256:" + b.sha256, b.size})
	}
	cfg, _ := json.Marshal(map[string]any{"model_format": "gguf", "model_family": "llama"})
	cb, _ := newBlob("", cfg)
	s.blobs[cb.sha256] = cb
	man, err := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
		"config": ml{"application/vnd.docker.container.image.v1+json", "sha256:" + cb.sha256, cb.size}, "layers": out})
	if err != nil {
		t.Fatal(err)
	}
	if s.ollama[name] == nil {
		s.ollama[name] = map[string][]byte{}
	}
	s.ollama[name][tag] = man
}

// CutOnce cuts the connection of the next download of the file with this SHA-256 after n
// bytes of the answer.
func (s *Server) CutOnce(sha string, n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cut[sha] = n
}

// Corrupt serves altered bytes for the file with this SHA-256 (its published hash stays).
func (s *Server) Corrupt(sha string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.corrupt[sha] = true
}

// TooMany answers the next n requests with 429 Too Many Requests.
func (s *Server) TooMany(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tooMany = n
}

// Requests returns the requests served so far ("METHOD PATH [RANGE]") and forgets them.
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.log
	s.log = nil
	return out
}

// Sent is how many bytes of files the server has sent.
func (s *Server) Sent() int64 { return s.sent.Load() }

// SHA256 returns the SHA-256 of a repository's file.
func (r *Repo) SHA256(path string) string { return r.files[path].sha256 }

// Size returns the size of a repository's file.
func (r *Repo) Size(path string) int64 { return r.files[path].size }

func (s *Server) serve(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	entry := req.Method + " " + req.URL.Path
	if rg := req.Header.Get("Range"); rg != "" {
		entry += " " + rg
	}
	s.log = append(s.log, entry)
	if s.tooMany > 0 {
		s.tooMany--
		s.mu.Unlock()
		w.Header().Set("Retry-After", "0")
		w.Header().Set("X-Error-Message", "You have been rate-limited; try again later")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	s.mu.Unlock()
	p := req.URL.EscapedPath()
	switch {
	case strings.HasPrefix(p, "/api/models/"):
		s.revision(w, req, strings.TrimPrefix(p, "/api/models/"))
	case strings.HasPrefix(p, "/cdn/"):
		s.cdn(w, req, strings.TrimPrefix(p, "/cdn/"))
	case strings.HasPrefix(p, "/v2/"):
		s.registry(w, req, strings.TrimPrefix(p, "/v2/"))
	default:
		s.resolve(w, req, strings.TrimPrefix(p, "/"))
	}
}

// cdnBase is where files' bytes are sent from: this server under another host name
// (localhost for 127.0.0.1), as the hub and the registry send them from a CDN's host.
func (s *Server) cdnBase() string {
	return strings.Replace(s.URL, "127.0.0.1", "localhost", 1)
}

func hubError(w http.ResponseWriter, code int, errCode, msg string) {
	if errCode != "" {
		w.Header().Set("X-Error-Code", errCode)
	}
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// repo finds a repository and a revision's commit, answering the hub's errors itself.
func (s *Server) repo(w http.ResponseWriter, req *http.Request, name, rev string, files bool) (*Repo, string, bool) {
	s.mu.Lock()
	r := s.repos[name]
	s.mu.Unlock()
	authed := s.Token != "" && req.Header.Get("Authorization") == "Bearer "+s.Token
	if req.Header.Get("Authorization") != "" && !authed && req.Header.Get("Authorization") == "Bearer invalid" {
		hubError(w, http.StatusUnauthorized, "", "Invalid credentials in Authorization header")
		return nil, "", false
	}
	if r == nil || (r.Private && !authed) {
		hubError(w, http.StatusUnauthorized, "RepoNotFound", "Repository Not Found for url: "+req.URL.String()+".")
		return nil, "", false
	}
	commit, ok := r.Branches[rev]
	if !ok && rev == r.Commit {
		commit, ok = rev, true
	}
	if !ok {
		hubError(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
		return nil, "", false
	}
	if files && r.Gated && !authed {
		code := http.StatusUnauthorized
		msg := "Access to model " + name + " is restricted. You must have access to it and be authenticated to access it. Please log in."
		if req.Header.Get("Authorization") != "" {
			code, msg = http.StatusForbidden, "Access to model "+name+" is restricted and you are not in the authorized list. Visit "+s.URL+"/"+name+" to ask for access."
		}
		hubError(w, code, "GatedRepo", msg)
		return nil, "", false
	}
	return r, commit, true
}

func (s *Server) redirectRenamed(w http.ResponseWriter, req *http.Request, name, rest string, api bool) bool {
	s.mu.Lock()
	to, ok := s.renamed[name]
	s.mu.Unlock()
	if !ok {
		return false
	}
	if api {
		http.Redirect(w, req, "/api/models/"+to+rest, http.StatusTemporaryRedirect)
	} else {
		http.Redirect(w, req, "/"+to+rest, http.StatusTemporaryRedirect)
	}
	return true
}

// revision answers GET /api/models/OWNER/REPO/revision/REV.
func (s *Server) revision(w http.ResponseWriter, req *http.Request, p string) {
	parts := strings.SplitN(p, "/", 4)
	if len(parts) != 4 || parts[2] != "revision" {
		hubError(w, http.StatusNotFound, "", "Not Found")
		return
	}
	name := parts[0] + "/" + parts[1]
	if s.redirectRenamed(w, req, name, "/revision/"+parts[3], true) {
		return
	}
	rev, _ := url.PathUnescape(parts[3])
	r, commit, ok := s.repo(w, req, name, rev, false)
	if !ok {
		return
	}
	type lfs struct {
		SHA256      string `json:"sha256"`
		Size        int64  `json:"size"`
		PointerSize int    `json:"pointerSize"`
	}
	type sib struct {
		Name   string `json:"rfilename"`
		BlobID string `json:"blobId"`
		Size   int64  `json:"size"`
		LFS    *lfs   `json:"lfs,omitempty"`
	}
	var sibs []sib
	for _, n := range sortedKeys(r.files) {
		b := r.files[n]
		e := sib{Name: n, BlobID: b.gitSHA1, Size: b.size}
		if b.lfs {
			e.LFS = &lfs{b.sha256, b.size, 134}
		}
		sibs = append(sibs, e)
	}
	gated := any(false)
	if r.Gated {
		gated = "auto"
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"id": r.Name, "sha": commit, "private": r.Private, "gated": gated, "siblings": sibs})
}

// resolve answers HEAD and GET /OWNER/REPO/resolve/REV/PATH.
func (s *Server) resolve(w http.ResponseWriter, req *http.Request, p string) {
	parts := strings.SplitN(p, "/", 5)
	if len(parts) != 5 || parts[2] != "resolve" {
		hubError(w, http.StatusNotFound, "", "Not Found")
		return
	}
	name := parts[0] + "/" + parts[1]
	if s.redirectRenamed(w, req, name, "/resolve/"+parts[3]+"/"+parts[4], false) {
		return
	}
	rev, _ := url.PathUnescape(parts[3])
	file, _ := url.PathUnescape(parts[4])
	r, commit, ok := s.repo(w, req, name, rev, true)
	if !ok {
		return
	}
	b := r.files[file]
	if b == nil {
		hubError(w, http.StatusNotFound, "EntryNotFound", file+" does not exist on \""+rev+"\"")
		return
	}
	h := w.Header()
	h.Set("X-Repo-Commit", commit)
	if b.lfs {
		h.Set("X-Linked-Etag", `"`+b.sha256+`"`)
		h.Set("X-Linked-Size", strconv.FormatInt(b.size, 10))
		h.Set("ETag", `"`+b.gitSHA1+`"`)
		h.Set("Location", fmt.Sprintf("%s/cdn/%s?Expires=%d&Signature=test", s.cdnBase(), b.sha256, time.Now().Add(time.Hour).Unix()))
		w.WriteHeader(http.StatusFound)
		return
	}
	h.Set("ETag", `"`+b.gitSHA1+`"`)
	s.send(w, req, b)
}

// registry answers /v2/NAMESPACE/NAME/manifests/TAG and /v2/NAMESPACE/NAME/blobs/DIGEST.
func (s *Server) registry(w http.ResponseWriter, req *http.Request, p string) {
	regErr := func(code int, c, msg string) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"errors":[{"code":%q,"message":%q}]}`, c, msg)
	}
	i := strings.LastIndex(p, "/manifests/")
	j := strings.LastIndex(p, "/blobs/")
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case i > 0:
		name, tag := p[:i], p[i+len("/manifests/"):]
		tags, ok := s.ollama[name]
		if !ok {
			regErr(http.StatusNotFound, "NAME_UNKNOWN", "repository name not known to registry")
			return
		}
		man, ok := tags[tag]
		if !ok {
			regErr(http.StatusNotFound, "MANIFEST_UNKNOWN", "manifest unknown")
			return
		}
		w.Header().Set("Content-Type", "application/vnd.docker.distribution.manifest.v2+json")
		w.Header().Set("Docker-Content-Digest", fmt.Sprintf("sha256:%x", sha256.Sum256(man)))
		w.Write(man)
	case j > 0:
		dig := p[j+len("/blobs/"):]
		b := s.blobs[strings.TrimPrefix(dig, "sha256:")]
		if b == nil || !strings.HasPrefix(dig, "sha256:") {
			regErr(http.StatusNotFound, "BLOB_UNKNOWN", "blob unknown to registry")
			return
		}
		http.Redirect(w, req, s.cdnBase()+"/cdn/"+b.sha256+"?Expires=1&Signature=test", http.StatusTemporaryRedirect)
	default:
		regErr(http.StatusNotFound, "NOT_FOUND", "not found")
	}
}

// cdn serves a file's bytes, with ranges, and the faults asked for.
func (s *Server) cdn(w http.ResponseWriter, req *http.Request, sha string) {
	s.mu.Lock()
	b := s.blobs[sha]
	cut, cutting := s.cut[sha]
	if cutting && req.Method == http.MethodGet {
		delete(s.cut, sha)
	}
	s.mu.Unlock()
	if b == nil {
		http.Error(w, "no such object", http.StatusNotFound)
		return
	}
	if cutting && req.Method == http.MethodGet {
		w = &cutter{ResponseWriter: w, left: cut}
	}
	s.send(w, req, b)
}

func (s *Server) send(w http.ResponseWriter, req *http.Request, b *blob) {
	rs, done, err := b.open()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	defer done()
	s.mu.Lock()
	bad := s.corrupt[b.sha256]
	s.mu.Unlock()
	if bad {
		all, _ := io.ReadAll(rs)
		all = append([]byte(nil), all...)
		if len(all) > 0 {
			all[len(all)/2] ^= 0xff
		}
		rs = bytes.NewReader(all)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(&counter{ResponseWriter: w, n: &s.sent}, req, "", time.Time{}, rs)
}

// cutter drops the connection after left bytes of the body.
type cutter struct {
	http.ResponseWriter
	left int64
}

func (c *cutter) Write(p []byte) (int, error) {
	if int64(len(p)) > c.left {
		c.ResponseWriter.Write(p[:c.left])
		if f, ok := c.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		panic(http.ErrAbortHandler)
	}
	c.left -= int64(len(p))
	return c.ResponseWriter.Write(p)
}

func (c *cutter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

type counter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (c *counter) Write(p []byte) (int, error) {
	n, err := c.ResponseWriter.Write(p)
	c.n.Add(int64(n))
	return n, err
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
