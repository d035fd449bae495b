package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStudioUIServing checks Hone Studio as `hone serve` answers it: the UI's pages (and the
// links the Weave SDK prints) answer index.html, its assets come with their types and
// immutable caching, API paths that do not exist stay JSON 404s, and GET /projects lists only
// the key's entity's projects.
func TestStudioUIServing(t *testing.T) {
	data := t.TempDir()
	s := startServer(t, data)
	key := initialKey(t, data)
	authz := basic("api", key)

	code, hdr, body := do(t, "GET", s.url+"/", "", "")
	if code != 200 || hdr.Get("Content-Type") != "text/html; charset=utf-8" || hdr.Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET /: %d %v", code, hdr)
	}
	asset := regexp.MustCompile(`/studio/[0-9a-f]{12}/static/app\.js`).Find(body)
	if asset == nil {
		t.Fatalf("index names no app.js: %s", body)
	}
	for _, p := range []string{"/local/my-project/weave", "/local/my-project/r/call/019a2b3c-0000-7000-8000-000000000001", "/playground", "/local/p/training"} {
		code, hdr, b := do(t, "GET", s.url+p, "", "")
		if code != 200 || !strings.HasPrefix(hdr.Get("Content-Type"), "text/html") || !bytes.Equal(b, body) {
			t.Errorf("%s: %d %s", p, code, hdr.Get("Content-Type"))
		}
	}
	code, hdr, js := do(t, "GET", s.url+string(asset), "", "")
	if code != 200 || hdr.Get("Content-Type") != "text/javascript; charset=utf-8" || !strings.Contains(hdr.Get("Cache-Control"), "immutable") || !bytes.Contains(js, []byte("import")) {
		t.Fatalf("%s: %d %v", asset, code, hdr)
	}
	vendor := strings.Replace(string(asset), "app.js", "vendor/uPlot.esm.js", 1)
	if code, _, b := do(t, "GET", s.url+vendor, "", ""); code != 200 || !bytes.Contains(b, []byte("uPlot")) {
		t.Fatalf("%s: %d", vendor, code)
	}
	// API paths keep their JSON errors.
	for _, p := range []string{"/nope", "/v1/nope", "/v1/preview/nope", "/local/p/weave/x/y/z/../../../../../../calls", "/studio/000000000000/static/app.js"} {
		code, hdr, b := do(t, "GET", s.url+p, "", "")
		if p == "/studio/000000000000/static/app.js" {
			if code != 404 {
				t.Errorf("%s: %d", p, code)
			}
			continue
		}
		if code == 200 && strings.HasPrefix(hdr.Get("Content-Type"), "text/html") {
			continue // a cleaned path that lands on a page is fine
		}
		if code != 404 || hdr.Get("Content-Type") != "application/json" || !bytes.Contains(b, []byte(`"error"`)) {
			t.Errorf("%s: %d %s %s", p, code, hdr.Get("Content-Type"), b)
		}
	}
	if code, hdr, _ := do(t, "POST", s.url+"/calls/query", authz, "{}"); code == 200 || hdr.Get("Content-Type") != "application/json" {
		t.Errorf("POST /calls/query {}: %d", code)
	}

	// GET /projects: the key's entity's trace projects only.
	call := `{"start":{"project_id":"%s","id":"c1","trace_id":"t1","op_name":"op","started_at":"2026-01-01T00:00:00Z","attributes":{},"inputs":{}}}`
	if code, _, b := do(t, "POST", s.url+"/call/start", authz, strings.Replace(call, "%s", "local/traced", 1)); code != 200 {
		t.Fatalf("call start %d %s", code, b)
	}
	if code, _, b := do(t, "POST", s.url+"/obj/create", authz, `{"obj":{"project_id":"local/objs","object_id":"o","val":{"a":1}}}`); code != 200 {
		t.Fatalf("obj create %d %s", code, b)
	}
	var other bytes.Buffer
	if runKeys(context.Background(), []string{"create", "--data", data, "--entity", "localx"}, &other, io.Discard) != 0 {
		t.Fatal("keys create")
	}
	lines := strings.Split(strings.TrimSpace(other.String()), "\n")
	authz2 := basic("api", lines[len(lines)-1])
	if code, _, b := do(t, "POST", s.url+"/call/start", authz2, strings.Replace(call, "%s", "localx/mine", 1)); code != 200 {
		t.Fatalf("call start %d %s", code, b)
	}
	for _, c := range []struct{ authz, want string }{{authz, `["local/objs","local/traced"]`}, {authz2, `["localx/mine"]`}} {
		code, _, b := do(t, "GET", s.url+"/projects", c.authz, "")
		var res struct{ Projects json.RawMessage }
		if code != 200 || json.Unmarshal(b, &res) != nil || string(res.Projects) != c.want {
			t.Errorf("GET /projects: %d %s, want %s", code, b, c.want)
		}
	}
	if code, _, _ := do(t, "GET", s.url+"/projects", "", ""); code != 401 {
		t.Errorf("GET /projects without a key: %d", code)
	}
}

// TestStudioBrowser drives Hone Studio in headless Debian chromium with puppeteer-core
// (conformance/studio/scenario.mjs; both installed by scripts/test-setup.sh), after the Weave
// TypeScript SDK (conformance/weave-ts) has written a trace, a Dataset and an Evaluation: the
// daily loop at 1440 px (calls table, traces, evaluations, objects, training, playground, each
// checked in the DOM and through the API), then every page at 390 and 360 px and at 2560 px, in
// light and dark, with the contrast of its text measured; no console error, page error or failed
// request but those a case provokes. Screenshots are written to $HONE_STUDIO_SCREENSHOTS
// (default: hone-studio-screenshots in the temporary directory) for a person to look at
// (docs-*.webp are docs/studio.md's); the path is logged.
func TestStudioBrowser(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "conformance", "studio")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "puppeteer-core")); err != nil {
		skipOrFail(t, "npm puppeteer-core is not installed in %s (run scripts/test-setup.sh)", dir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not installed")
	}
	browser := os.Getenv("HONE_CHROMIUM")
	if browser == "" {
		browser, err = exec.LookPath("chromium")
		if err != nil {
			skipOrFail(t, "chromium is not installed (scripts/test-setup.sh installs Debian's)")
		}
	}
	shots := os.Getenv("HONE_STUDIO_SCREENSHOTS")
	if shots == "" {
		shots = filepath.Join(os.TempDir(), "hone-studio-screenshots")
	}
	_ = os.RemoveAll(shots)
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	s := startServer(t, data)
	key := initialKey(t, data)
	var out bytes.Buffer
	if runKeys(context.Background(), []string{"create", "--data", data, "--entity", "other"}, &out, io.Discard) != 0 {
		t.Fatal("keys create")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	key2 := lines[len(lines)-1]

	// A trace, a Dataset and an Evaluation written by the Weave TypeScript SDK, opened in the UI.
	weaveTS := filepath.Join(repoRoot(t), "conformance", "weave-ts")
	var sdkEnv []string
	if _, err := os.Stat(filepath.Join(weaveTS, "node_modules", "weave")); err != nil {
		if requireConformance() {
			t.Fatalf("npm weave is not installed in %s (run scripts/test-setup.sh)", weaveTS)
		}
		t.Logf("npm weave is not installed in %s: the UI is tested on traces written through the API only", weaveTS)
	} else {
		sdk := runSDK(t, s, key, "local/weave-ts", node, filepath.Join(weaveTS, "scenario.mjs"))
		sdkEnv = []string{"HONE_SDK_PROJECT=local/weave-ts", "HONE_SDK_ROOT=" + sdk.RootCallID}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, filepath.Join(dir, "scenario.mjs"))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "HONE_URL="+s.url, "HONE_KEY="+key, "HONE_KEY2="+key2, "HONE_OUT="+shots, "HONE_CHROMIUM="+browser)
	cmd.Env = append(cmd.Env, sdkEnv...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("studio scenario: %v (screenshots in %s)\nstdout:\n%s\nstderr:\n%s", err, shots, stdout.String(), stderr.String())
	}
	wantChecks := 224 // and 3 more on the SDK's trace and evaluation
	if sdkEnv != nil {
		wantChecks += 3
	}
	outLines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res struct {
		OK     bool               `json:"ok"`
		Checks int                `json:"checks"`
		Perf   map[string]float64 `json:"perf"`
		Timing map[string]float64 `json:"timing"`
	}
	if err := json.Unmarshal([]byte(outLines[len(outLines)-1]), &res); err != nil || !res.OK || res.Checks < wantChecks {
		t.Fatalf("scenario printed %q (err %v)", stdout.String(), err)
	}
	t.Logf("studio in chromium: %d checks passed; page loads %v ms; time by part %v ms; screenshots in %s", res.Checks, res.Perf, res.Timing, shots)
}
