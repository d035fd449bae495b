package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/openapi"
)

// testGate blocks the /v1/_test/slow route until closed, to hold a request in flight.
var (
	testGateMu sync.Mutex
	testGate   = make(chan struct{})
	testInSlow = make(chan struct{}, 16)
)

// A test-only area with one route per authentication scheme and routes that fail on purpose.
func init() {
	extraRoutes = append(extraRoutes, func(r *httpx.Router, bearer, basic httpx.Middleware) {
		project := func(w http.ResponseWriter, req *http.Request) {
			var body struct {
				ProjectID string `json:"project_id"`
			}
			if err := httpx.DecodeJSON(req, &body, httpx.DecodeOptions{Strict: true}); err != nil {
				apierror.Write(w, req, err)
				return
			}
			e, p, err := auth.Project(req.Context(), body.ProjectID, "project_id")
			if err != nil {
				apierror.Write(w, req, err)
				return
			}
			httpx.WriteJSON(w, 200, map[string]string{"entity": e, "project": p})
		}
		op := &openapi.Operation{Summary: "test route"}
		r.Group(basic).Secured(openapi.BasicAuth).HandleFunc("POST /_test/basic", project, op)
		r.Group(bearer).Secured(openapi.BearerAuth).HandleFunc("POST /v1/_test/bearer", project, op)
		r.Group(bearer).Secured(openapi.BearerAuth).HandleFunc("POST /v1/_test/panic", func(http.ResponseWriter, *http.Request) { panic("secret internals") }, op)
		r.Group(bearer).Secured(openapi.BearerAuth).HandleFunc("GET /v1/_test/slow", func(w http.ResponseWriter, req *http.Request) {
			testInSlow <- struct{}{}
			testGateMu.Lock()
			g := testGate
			testGateMu.Unlock()
			<-g
			httpx.WriteJSON(w, 200, map[string]string{"done": "yes"})
		}, op)
	})
}

type server struct {
	url    string
	cancel context.CancelFunc
	done   chan int
	stdout *bytes.Buffer
}

type syncBuffer struct {
	mu sync.Mutex
	bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.Buffer.Write(p)
}

func startServer(t testing.TB, dataDir string, args ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	out := &syncBuffer{}
	done := make(chan int, 1)
	all := append([]string{"--addr", "127.0.0.1:0", "--data", dataDir}, args...)
	go func() { done <- runServe(ctx, all, out, io.Discard, ready) }()
	select {
	case addr := <-ready:
		s := &server{url: "http://" + addr, cancel: cancel, done: done}
		out.mu.Lock()
		s.stdout = bytes.NewBuffer(append([]byte(nil), out.Bytes()...))
		out.mu.Unlock()
		t.Cleanup(func() { s.stop(t) })
		return s
	case code := <-done:
		cancel()
		t.Fatalf("server exited with %d", code)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("server did not start")
	}
	cancel()
	return nil
}

func (s *server) stop(t testing.TB) int {
	t.Helper()
	if s.cancel == nil {
		return 0
	}
	s.cancel()
	s.cancel = nil
	select {
	case code := <-s.done:
		return code
	case <-time.After(60 * time.Second):
		t.Fatal("server did not stop")
	}
	return -1
}

func initialKey(t testing.TB, dataDir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dataDir, InitialKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func do(t testing.TB, method, url, authz, body string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b
}

func envelope(t *testing.T, body []byte) apierror.Info {
	t.Helper()
	var env struct {
		Error *apierror.Info `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil || env.Error == nil {
		t.Fatalf("not an error envelope: %s", body)
	}
	return *env.Error
}

func basic(user, key string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+key))
}

func TestFirstStartKeyAndRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s := startServer(t, dir)
	key := initialKey(t, dir)
	if !strings.Contains(s.stdout.String(), key) {
		t.Fatalf("first start did not print the key:\n%s", s.stdout)
	}
	fi, err := os.Stat(filepath.Join(dir, InitialKeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("initial key file mode: %v %v", fi.Mode(), err)
	}
	code, _, body := do(t, "POST", s.url+"/v1/_test/bearer", "Bearer "+key, `{"project_id":"local/p"}`)
	if code != 200 {
		t.Fatalf("authenticated call: %d %s", code, body)
	}
	if c := s.stop(t); c != 0 {
		t.Fatalf("exit code %d", c)
	}
	// Restart: the key still works, and no new key is made or printed.
	s = startServer(t, dir)
	if strings.Contains(s.stdout.String(), "hone_") {
		t.Fatalf("restart printed a key:\n%s", s.stdout)
	}
	if code, _, body := do(t, "POST", s.url+"/v1/_test/bearer", "Bearer "+key, `{"project_id":"local/p"}`); code != 200 {
		t.Fatalf("after restart: %d %s", code, body)
	}
}

func TestAuthMatrix(t *testing.T) {
	dir := t.TempDir()
	// Keys made through the CLI, as a user would.
	var out bytes.Buffer
	if c := runKeys(context.Background(), []string{"create", "--data", dir, "--entity", "a"}, &out, io.Discard); c != 0 {
		t.Fatal("keys create failed")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	keyA := lines[len(lines)-1]
	out.Reset()
	runKeys(context.Background(), []string{"create", "--data", dir, "--entity", "b"}, &out, io.Discard)
	lines = strings.Split(strings.TrimSpace(out.String()), "\n")
	keyB := lines[len(lines)-1]
	out.Reset()
	runKeys(context.Background(), []string{"create", "--data", dir, "--entity", "a", "--name", "revoked"}, &out, io.Discard)
	lines = strings.Split(strings.TrimSpace(out.String()), "\n")
	keyRevoked := lines[len(lines)-1]
	id, _, _ := strings.Cut(strings.TrimPrefix(keyRevoked, "hone_"), "_")
	if c := runKeys(context.Background(), []string{"revoke", id, "--data", dir}, io.Discard, io.Discard); c != 0 {
		t.Fatal("revoke failed")
	}
	out.Reset()
	runKeys(context.Background(), []string{"list", "--data", dir}, &out, io.Discard)
	if strings.Contains(out.String(), keyA) || !strings.Contains(out.String(), "revoked") {
		t.Fatalf("keys list shows a secret or misses the revoked key:\n%s", out.String())
	}

	s := startServer(t, dir)
	if _, err := os.Stat(filepath.Join(dir, InitialKeyFile)); err == nil {
		t.Fatal("an initial key was made although keys existed")
	}
	bearer := s.url + "/v1/_test/bearer"
	basicURL := s.url + "/_test/basic"
	own, other := `{"project_id":"a/x"}`, `{"project_id":"b/x"}`
	cases := []struct {
		name, url, authz, body string
		status                 int
	}{
		{"bearer ok", bearer, "Bearer " + keyA, own, 200},
		{"bearer no header", bearer, "", own, 401},
		{"bearer wrong scheme", bearer, basic("api", keyA), own, 401},
		{"bearer unknown key", bearer, "Bearer hone_AAAAAAAAAAAA_" + strings.Repeat("a", 40), own, 401},
		{"bearer garbage key", bearer, "Bearer nope", own, 401},
		{"bearer revoked", bearer, "Bearer " + keyRevoked, own, 401},
		{"bearer other entity", bearer, "Bearer " + keyA, other, 403},
		{"bearer other entity missing project", bearer, "Bearer " + keyA, `{"project_id":"b/never"}`, 403},
		{"bearer entity b own", bearer, "Bearer " + keyB, other, 200},
		{"bearer malformed project", bearer, "Bearer " + keyA, `{"project_id":"ax"}`, 400},
		{"basic ok", basicURL, basic("api", keyA), own, 200},
		{"basic any username", basicURL, basic("someone", keyA), own, 200},
		{"basic no header", basicURL, "", own, 401},
		{"basic wrong scheme", basicURL, "Bearer " + keyA, own, 401},
		{"basic bad base64", basicURL, "Basic %%%not-base64", own, 401},
		{"basic no colon", basicURL, "Basic " + base64.StdEncoding.EncodeToString([]byte(keyA)), own, 401},
		{"basic unknown key", basicURL, basic("api", "hone_AAAAAAAAAAAA_"+strings.Repeat("a", 40)), own, 401},
		{"basic revoked", basicURL, basic("api", keyRevoked), own, 401},
		{"basic other entity", basicURL, basic("api", keyA), other, 403},
		{"basic unknown field (strict)", basicURL, basic("api", keyA), `{"project_id":"a/x","bogus":1}`, 400},
		{"basic malformed json", basicURL, basic("api", keyA), `{"project_id":`, 400},
		{"basic wrong type", basicURL, basic("api", keyA), `{"project_id":5}`, 400},
	}
	for _, c := range cases {
		code, hdr, body := do(t, "POST", c.url, c.authz, c.body)
		if code != c.status {
			t.Errorf("%s: status %d, want %d: %s", c.name, code, c.status, body)
			continue
		}
		if code != 200 {
			e := envelope(t, body)
			if e.Code != code {
				t.Errorf("%s: envelope code %d", c.name, e.Code)
			}
			if strings.Contains(string(body), keyA) || strings.Contains(string(body), keyRevoked) {
				t.Errorf("%s: error echoes the key", c.name)
			}
			if code == 401 && hdr.Get("WWW-Authenticate") == "" {
				t.Errorf("%s: 401 without WWW-Authenticate", c.name)
			}
			if code == 403 && strings.Contains(e.Message, `"b"`) {
				t.Errorf("%s: 403 names the other entity: %s", c.name, e.Message)
			}
		}
		if c.name == "basic wrong type" {
			if e := envelope(t, body); e.Param == nil || *e.Param != "project_id" {
				t.Errorf("wrong type: param %v", e.Param)
			}
		}
	}
	// Health needs no auth; system-check does.
	if code, _, _ := do(t, "GET", s.url+"/v1/health", "", ""); code != 200 {
		t.Errorf("health: %d", code)
	}
	if code, _, _ := do(t, "GET", s.url+"/v1/system-check", "", ""); code != 401 {
		t.Errorf("system-check without auth: %d", code)
	}
}

func TestEnvelopeForEachClass(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--max-body-bytes", "1024", "--max-concurrent-per-key", "1")
	key := "Bearer " + initialKey(t, dir)
	check := func(name string, code int, body []byte, want int) {
		t.Helper()
		if code != want {
			t.Errorf("%s: %d, want %d: %s", name, code, want, body)
			return
		}
		if e := envelope(t, body); e.Code != want || e.Type == "" || e.Message == "" {
			t.Errorf("%s: bad envelope %+v", name, e)
		}
	}
	code, _, body := do(t, "POST", s.url+"/v1/_test/bearer", key, `{"project_id": [}`)
	check("400 malformed", code, body, 400)
	code, _, body = do(t, "POST", s.url+"/v1/_test/bearer", "", `{}`)
	check("401", code, body, 401)
	code, _, body = do(t, "POST", s.url+"/v1/_test/bearer", key, `{"project_id":"other/p"}`)
	check("403", code, body, 403)
	code, _, body = do(t, "GET", s.url+"/v1/nothing-here", key, "")
	check("404", code, body, 404)
	code, _, body = do(t, "DELETE", s.url+"/v1/health", "", "")
	check("405", code, body, 405)
	code, _, body = do(t, "POST", s.url+"/v1/_test/bearer", key, `{"project_id":"`+strings.Repeat("x", 2000)+`"}`)
	check("413", code, body, 413)
	code, _, body = do(t, "POST", s.url+"/v1/_test/panic", key, "")
	check("500", code, body, 500)
	if strings.Contains(string(body), "secret internals") {
		t.Errorf("500 leaks internals: %s", body)
	}
	// 429: one slow request holds the key's only slot.
	testGateMu.Lock()
	testGate = make(chan struct{})
	gate := testGate
	testGateMu.Unlock()
	slow := make(chan int, 1)
	go func() {
		c, _, _ := do(t, "GET", s.url+"/v1/_test/slow", key, "")
		slow <- c
	}()
	<-testInSlow
	code, hdr, body := do(t, "POST", s.url+"/v1/_test/bearer", key, `{"project_id":"local/p"}`)
	check("429", code, body, 429)
	if hdr.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	close(gate)
	if c := <-slow; c != 200 {
		t.Errorf("slow request: %d", c)
	}
	if code, _, body := do(t, "POST", s.url+"/v1/_test/bearer", key, `{"project_id":"local/p"}`); code != 200 {
		t.Errorf("slot not released: %d %s", code, body)
	}
}

func TestGracefulShutdownDrainsInFlight(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	key := "Bearer " + initialKey(t, dir)
	testGateMu.Lock()
	testGate = make(chan struct{})
	gate := testGate
	testGateMu.Unlock()
	result := make(chan string, 1)
	go func() {
		code, _, body := do(t, "GET", s.url+"/v1/_test/slow", key, "")
		result <- fmt.Sprintf("%d %s", code, bytes.TrimSpace(body))
	}()
	<-testInSlow
	stopped := make(chan int, 1)
	go func() { stopped <- s.stop(t) }()
	// The server is shutting down but waits for the request in flight.
	select {
	case <-stopped:
		t.Fatal("server stopped before the in-flight request finished")
	case <-time.After(300 * time.Millisecond):
	}
	close(gate)
	if r := <-result; r != `200 {"done":"yes"}` {
		t.Fatalf("in-flight request got %q", r)
	}
	if c := <-stopped; c != 0 {
		t.Fatalf("exit code %d", c)
	}
	// The store was closed cleanly: it reopens with the key intact.
	s = startServer(t, dir)
	if code, _, body := do(t, "POST", s.url+"/v1/_test/bearer", key, `{"project_id":"local/p"}`); code != 200 {
		t.Fatalf("after restart: %d %s", code, body)
	}
}

func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	dir := t.TempDir()
	var cfg ServeConfig
	if err := newServeFlags(&cfg).Parse(nil); err != nil {
		t.Fatal(err)
	}
	cfg.DataDir = dir
	sys, err := newSystem(context.Background(), cfg, newTestLogger(), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	_, router, err := sys.handler()
	sys.close()
	if err != nil {
		t.Fatal(err)
	}
	routes := router.Routes()
	if missing := openapi.Undocumented(routes); len(missing) > 0 {
		t.Fatalf("routes without OpenAPI documentation: %v", missing)
	}
	s := startServer(t, dir)
	code, _, body := do(t, "GET", s.url+"/openapi.json", "", "")
	if code != 200 {
		t.Fatalf("openapi.json: %d", code)
	}
	var doc struct {
		OpenAPI string                    `json:"openapi"`
		Paths   map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("bad document: %v %q", err, doc.OpenAPI)
	}
	for _, rt := range routes {
		p := openapi.PathTemplate(rt.Path)
		if _, ok := doc.Paths[p][strings.ToLower(rt.Method)]; !ok {
			t.Errorf("route %s %s missing from /openapi.json", rt.Method, rt.Path)
		}
	}
	for _, want := range []string{"/v1/health", "/v1/system-check", "/health", "/server_info"} {
		if _, ok := doc.Paths[want]; !ok {
			t.Errorf("%s missing", want)
		}
	}
}

func TestEnvironmentConfiguresFlags(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HONE_DATA", dir)
	t.Setenv("HONE_MAX_CONCURRENT_PER_KEY", "7")
	var cfg ServeConfig
	fs := newServeFlags(&cfg)
	if err := parseWithEnv(fs, []string{"--addr", "127.0.0.1:1"}); err != nil {
		t.Fatal(err)
	}
	if cfg.DataDir != dir || cfg.MaxConcurrentKey != 7 || cfg.Addr != "127.0.0.1:1" {
		t.Fatalf("cfg = %+v", cfg)
	}
	t.Setenv("HONE_ADDR", "127.0.0.1:2")
	if err := parseWithEnv(newServeFlags(&cfg), []string{"--addr", "127.0.0.1:3"}); err != nil || cfg.Addr != "127.0.0.1:3" {
		t.Fatalf("flag must win over env: %q %v", cfg.Addr, err)
	}
	t.Setenv("HONE_MAX_BODY_BYTES", "lots")
	if err := parseWithEnv(newServeFlags(&cfg), nil); err == nil || !strings.Contains(err.Error(), "HONE_MAX_BODY_BYTES") {
		t.Fatalf("bad env accepted: %v", err)
	}
}

// The real binary stops cleanly on SIGTERM.
func TestBinaryStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	if out, err := exec.Command(bin, "version").Output(); err != nil || !strings.HasPrefix(string(out), "hone ") {
		t.Fatalf("version: %q %v", out, err)
	}
	dir := t.TempDir()
	cmd := exec.Command(bin, "serve", "--data", dir, "--addr", "127.0.0.1:0")
	var stderr syncBuffer
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	var got string
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(got, "listening on") && time.Now().Before(deadline) {
		n, err := stdout.Read(buf)
		got += string(buf[:n])
		if err != nil {
			break
		}
	}
	if !strings.Contains(got, "listening on") {
		t.Fatalf("no listen line: %q", got)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "store closed") {
		t.Fatalf("store not closed cleanly:\n%s", stderr.String())
	}
	key := initialKey(t, dir)
	if strings.Contains(stderr.String(), key) {
		t.Fatal("the key appears in the logs")
	}
}

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// TestMain removes the binary buildBinary built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binaryPath != "" {
		os.RemoveAll(filepath.Dir(binaryPath))
	}
	os.Exit(code)
}

// buildBinary builds the hone binary once per test run.
func buildBinary(t testing.TB) string {
	t.Helper()
	binaryOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hone-bin-")
		if err != nil {
			binaryErr = err
			return
		}
		binaryPath = filepath.Join(dir, "hone")
		if out, err := exec.Command("go", "build", "-o", binaryPath, ".").CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("build: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}
