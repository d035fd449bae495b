package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// requireConformance reports whether conformance clients must be present (set by scripts/test.sh
// after it installed them); otherwise a missing client skips its test.
func requireConformance() bool { return os.Getenv("HONE_REQUIRE_CONFORMANCE") == "1" }

func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if requireConformance() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// repoRoot is the module root (tests run in cmd/hone).
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

type sdkResult struct {
	ObjectDigests     []string                    `json:"object_digests"`
	DatasetDigest     string                      `json:"dataset_digest"`
	Rows              []map[string]any            `json:"rows"`
	ExpectedRootUsage map[string]map[string]int64 `json:"expected_root_usage"`
}

// runSDK runs a scenario script against s and returns what it reports.
func runSDK(t *testing.T, s *server, key, project string, name string, args ...string) sdkResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = t.TempDir() // the SDKs may write logs into the working directory
	cmd.Env = append(os.Environ(),
		"WF_TRACE_SERVER_URL="+s.url, "WANDB_BASE_URL="+s.url, "WANDB_API_KEY="+key,
		"HONE_PROJECT="+project, "WEAVE_PRINT_CALL_LINK=false", "WANDB_SILENT=true", "WEAVE_DISABLED=false",
		"HOME="+cmd.Dir, "WEAVE_USE_SERVER_CACHE=false", "WEAVE_SERVER_CACHE_DIR="+filepath.Join(cmd.Dir, "weave-cache"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", name, err, stdout.String(), stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	var res sdkResult
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &res); err != nil {
		t.Fatalf("%s printed no result: %v\n%s\n%s", name, err, stdout.String(), stderr.String())
	}
	return res
}

func post(t *testing.T, s *server, key, path string, body any, out any) {
	t.Helper()
	b, _ := json.Marshal(body)
	code, _, resp := do(t, "POST", s.url+path, basic("api", key), string(b))
	if code != 200 {
		t.Fatalf("%s: %d %s", path, code, resp)
	}
	if err := json.Unmarshal(resp, out); err != nil {
		t.Fatalf("%s: %v: %s", path, err, resp)
	}
}

// checkSDKWrites checks, through Hone's own endpoints, what a Weave SDK wrote.
func checkSDKWrites(t *testing.T, s *server, key, project string, res sdkResult) {
	// Two versions of the object; latest_only finds the second.
	var objs struct {
		Objs []struct {
			Digest       string `json:"digest"`
			VersionIndex int    `json:"version_index"`
			IsLatest     int    `json:"is_latest"`
		} `json:"objs"`
	}
	post(t, s, key, "/objs/query", map[string]any{"project_id": project, "filter": map[string]any{"object_ids": []string{"config"}}}, &objs)
	if len(objs.Objs) != 2 || objs.Objs[0].Digest != res.ObjectDigests[0] || objs.Objs[1].Digest != res.ObjectDigests[1] {
		t.Fatalf("config versions = %+v, SDK digests %v", objs.Objs, res.ObjectDigests)
	}
	post(t, s, key, "/objs/query", map[string]any{"project_id": project, "filter": map[string]any{"object_ids": []string{"config"}, "latest_only": true}}, &objs)
	if len(objs.Objs) != 1 || objs.Objs[0].Digest != res.ObjectDigests[1] || objs.Objs[0].VersionIndex != 1 || objs.Objs[0].IsLatest != 1 {
		t.Fatalf("latest_only = %+v", objs.Objs)
	}

	// The dataset's rows come back in order with their absolute indexes.
	var ds struct {
		Obj struct {
			Digest string `json:"digest"`
			Val    struct {
				Rows string `json:"rows"`
			} `json:"val"`
			BaseObjectClass string `json:"base_object_class"`
		} `json:"obj"`
	}
	post(t, s, key, "/obj/read", map[string]any{"project_id": project, "object_id": "arith", "digest": "latest"}, &ds)
	if ds.Obj.Digest != res.DatasetDigest || ds.Obj.BaseObjectClass != "Dataset" {
		t.Fatalf("dataset = %+v, SDK digest %s", ds.Obj, res.DatasetDigest)
	}
	tableDigest := ds.Obj.Val.Rows[strings.LastIndex(ds.Obj.Val.Rows, "/")+1:]
	var tq struct {
		Rows []struct {
			Digest        string         `json:"digest"`
			Val           map[string]any `json:"val"`
			OriginalIndex int            `json:"original_index"`
		} `json:"rows"`
	}
	post(t, s, key, "/table/query", map[string]any{"project_id": project, "digest": tableDigest}, &tq)
	if len(tq.Rows) != len(res.Rows) {
		t.Fatalf("table rows = %d, want %d", len(tq.Rows), len(res.Rows))
	}
	for i, r := range tq.Rows {
		if r.OriginalIndex != i || r.Val["question"] != res.Rows[i]["question"] || r.Val["answer"] != res.Rows[i]["answer"] {
			t.Fatalf("row %d = %+v, want %v", i, r, res.Rows[i])
		}
	}
	if tq.Rows[0].Digest != tq.Rows[2].Digest {
		t.Fatal("equal rows have different digests")
	}

	// The usage roll-up of the trace root equals the sum computed by hand.
	var roots []map[string]any
	code, _, body := do(t, "POST", s.url+"/calls/stream_query", basic("api", key),
		`{"project_id":"`+project+`","filter":{"trace_roots_only":true}}`)
	if code != 200 {
		t.Fatalf("stream_query: %d %s", code, body)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
		var c map[string]any
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("bad JSON line %q", line)
		}
		roots = append(roots, c)
	}
	if len(roots) != 1 {
		t.Fatalf("trace roots = %d", len(roots))
	}
	rootID, traceID := roots[0]["id"].(string), roots[0]["trace_id"].(string)
	var usage struct {
		CallUsage         map[string]map[string]map[string]int64 `json:"call_usage"`
		UnfinishedCallIDs []string                               `json:"unfinished_call_ids"`
	}
	post(t, s, key, "/trace/usage", map[string]any{"project_id": project, "filter": map[string]any{"trace_ids": []string{traceID}}}, &usage)
	if len(usage.CallUsage) != 5 || len(usage.UnfinishedCallIDs) != 0 {
		t.Fatalf("usage covers %d calls (want 5), unfinished %v", len(usage.CallUsage), usage.UnfinishedCallIDs)
	}
	for model, want := range res.ExpectedRootUsage {
		got := usage.CallUsage[rootID][model]
		for k, v := range want {
			if got[k] != v {
				t.Errorf("root usage %s.%s = %d, want %d (all: %v)", model, k, got[k], v, usage.CallUsage[rootID])
			}
		}
		if got["total_tokens"] != want["prompt_tokens"]+want["completion_tokens"] {
			t.Errorf("root usage %s total = %d", model, got["total_tokens"])
		}
	}
}

func TestConformanceWeaveTypeScriptSDK(t *testing.T) {
	root := repoRoot(t)
	dir := filepath.Join(root, "conformance", "weave-ts")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "weave")); err != nil {
		skipOrFail(t, "npm weave is not installed in %s (run scripts/test-setup.sh)", dir)
	}
	node, err := exec.LookPath("node")
	if err != nil {
		skipOrFail(t, "node is not installed")
	}
	data := t.TempDir()
	s := startServer(t, data)
	key := initialKey(t, data)
	res := runSDK(t, s, key, "local/weave-ts", node, filepath.Join(dir, "scenario.mjs"))
	checkSDKWrites(t, s, key, "local/weave-ts", res)
}

// weavePython finds a Python with the weave package: HONE_WEAVE_PYTHON, or the venv
// scripts/test-setup.sh makes.
func weavePython(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("HONE_WEAVE_PYTHON"), filepath.Join(repoRoot(t), "conformance", "weave-py", ".venv", "bin", "python")}
	for _, py := range candidates {
		if py == "" {
			continue
		}
		if err := exec.Command(py, "-c", "import weave").Run(); err == nil {
			return py
		}
	}
	return ""
}

func TestConformanceWeavePythonSDK(t *testing.T) {
	py := weavePython(t)
	if py == "" {
		skipOrFail(t, "no Python with the weave package (set HONE_WEAVE_PYTHON or run scripts/test-setup.sh)")
	}
	data := t.TempDir()
	s := startServer(t, data)
	key := initialKey(t, data)
	res := runSDK(t, s, key, "local/weave-py", py, filepath.Join(repoRoot(t), "conformance", "weave-py", "scenario.py"))
	checkSDKWrites(t, s, key, "local/weave-py", res)
}
