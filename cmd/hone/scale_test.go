package main

// The scale-out test (issue 20, docs/deploy.md): several `hone serve` nodes and `hone
// worker` processes, each with its own data directory, on one PostgreSQL.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// TestScaleOut runs two `hone serve` nodes (A, B: --train-workers 0, so they only serve) and
// two `hone worker` processes, the real binary, on loopback and one PostgreSQL schema, each
// process with its own data directory:
//
//  0. A random-weight base model is registered by name (`hone models register`); its
//     directory is removed before any node starts.
//  1. On A: a model, an uploaded SFT file, an SFT job, a traced call and a trace file, and a
//     second API key
//     (made by `hone keys create` on the same store). A then stops and its data directory is
//     renamed away: until step 5 no path of A's exists.
//  2. The workers start; the one holding the job's lease (found by the pid in lease_owner) is
//     killed with SIGKILL in the middle of the job and its data directory removed; the other
//     finishes the job (the lease, 2 s, runs out).
//  3. B, the only data directory left besides the survivor's, serves the checkpoint the
//     worker wrote (chat with model:step1), reads the call and the file traced on A, and refuses the
//     second key once it is revoked.
//  4. An RL job sent to B, on rollouts B sampled from step 1, runs on the surviving worker,
//     which then stops and whose data directory is removed.
//  5. A's directory is put back and A started again: it serves step 1 (the same greedy
//     answer as B) and step 2, written by a worker whose directory no longer exists, refuses
//     the revoked key, and lists the same /v1/models as B (the registered base model among
//     them, served by B too). A third node started on an empty directory answers the same.
//
// What this proves: every read of something another process wrote (the upload by the
// worker, the checkpoints by B and A, the traced call by B, the keys by both) happened while
// the writer's data directory did not exist at its path, so it can only have come through
// PostgreSQL. No process is ever given another's directory. What it does not prove: that a
// process could not read a sibling directory that did exist (we run as root, so permissions
// cannot forbid it) — the survivor worker's and B's directories were present in steps 2-4,
// but neither held anything another process needed (B wrote nothing a worker reads).
func TestScaleOut(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs four processes")
	}
	if os.Getenv(dbtest.PostgresEnv) == "" {
		skipOrFail(t, "%s is not set: no PostgreSQL server for this test", dbtest.PostgresEnv)
	}
	bin := buildBinary(t)
	dsn := pgSchemaDSN(t)
	root := t.TempDir()
	dirA, dirB := filepath.Join(root, "node-a"), filepath.Join(root, "node-b")
	store := []string{"--db", dsn, "--job-lease", "2s"}
	serveArgs := append([]string{"--train-workers", "0", "--base-model-poll", "200ms"}, store...)
	started := time.Now()

	// 0. A base model registered once by name, its source and the registering machine's
	// cache removed before any node starts.
	src, cli := filepath.Join(root, "src-tiny"), filepath.Join(root, "cli")
	var out, errb bytes.Buffer
	if rc := runModels([]string{"synth", "--arch", "llama", "--preset", "tiny", "--out", src}, &out, &errb); rc != 0 {
		t.Fatalf("models synth: %s", errb.String())
	}
	if rc := runModels([]string{"register", "--db", dsn, "--data", cli, "tiny", src}, &out, &errb); rc != 0 {
		t.Fatalf("models register: %s", errb.String())
	}
	if err := errors.Join(os.RemoveAll(src), os.RemoveAll(cli)); err != nil {
		t.Fatal(err)
	}

	// 1. A takes the requests.
	cmdA, urlA, _ := startBinary(t, bin, dirA, serveArgs...)
	a := &server{url: urlA}
	_, urlB, _ := startBinary(t, bin, dirB, serveArgs...)
	b := &server{url: urlB}
	key := initialKey(t, dirA)
	if _, err := os.Stat(filepath.Join(dirB, InitialKeyFile)); err == nil {
		t.Fatal("B made a first-start key on a store that had one")
	}
	bearer := "Bearer " + key
	job := newSFTJob(t, a, bearer, "scale", 40)
	code, _, body := do(t, "GET", a.url+"/v1/preview/training-jobs/"+job, bearer, "")
	modelID := jsonOf(t, code, body, 200)["model_id"].(string)
	call := `{"start":{"project_id":"local/scale","id":"call-on-a","trace_id":"t1","op_name":"op","started_at":"2025-01-01T00:00:00Z","attributes":{},"inputs":{"q":"from A"}}}`
	if code, _, body := do(t, "POST", a.url+"/call/start", basic("api", key), call); code != 200 {
		t.Fatalf("call/start on A: %d %s", code, body)
	}
	fileDigest := createTraceFile(t, a.url, key, "local/scale", []byte("a file traced on A\n"))
	if rc := runKeys(context.Background(), []string{"create", "--data", filepath.Join(root, "keys"), "--db", dsn, "--entity", "local"}, &out, &errb); rc != 0 {
		t.Fatalf("keys create: %d %s", rc, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	key2 := strings.TrimSpace(lines[len(lines)-1])
	if code, _, body := do(t, "GET", a.url+"/v1/models", "Bearer "+key2, ""); code != 200 {
		t.Fatalf("the second key on A: %d %s", code, body)
	}
	_ = cmdA.Process.Signal(syscall.SIGTERM)
	_ = cmdA.Wait()
	hiddenA := filepath.Join(root, "node-a.off")
	if err := os.Rename(dirA, hiddenA); err != nil {
		t.Fatal(err)
	}

	// 2. Two workers; the one running the job is killed.
	workers := map[int]*exec.Cmd{}
	workerDirs := map[int]string{}
	for i := 1; i <= 2; i++ {
		dir := filepath.Join(root, fmt.Sprintf("worker-%d", i))
		cmd := exec.Command(bin, append([]string{"worker", "--data", dir, "--log-level", "warn"}, store...)...)
		cmd.Stderr = &syncBuffer{}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		workers[cmd.Process.Pid], workerDirs[cmd.Process.Pid] = cmd, dir
	}
	waitSteps(t, b, bearer, job, 0)
	owner := leaseOwner(t, dsn, job)
	victim, ok := workers[owner]
	if !ok {
		t.Fatalf("the job's lease owner %d is not one of the workers %v", owner, workers)
	}
	_ = victim.Process.Signal(syscall.SIGKILL)
	_ = victim.Wait()
	killed := time.Now()
	if err := os.RemoveAll(workerDirs[owner]); err != nil {
		t.Fatal(err)
	}
	delete(workers, owner)
	var survivor *exec.Cmd
	var survivorDir string
	for pid, w := range workers {
		survivor, survivorDir = w, workerDirs[pid]
	}
	j := waitJob(t, b, bearer, job)
	if j["status"] != "SUCCEEDED" {
		t.Fatalf("after kill -9 of its worker the job is %v", j)
	}
	if got := leaseOwnerAfter(t, dsn, job); got != "" {
		t.Fatalf("the job still has a lease owner %q", got)
	}
	t.Logf("the job succeeded on the other worker %.1fs after the kill", time.Since(killed).Seconds())

	// 3. B serves what the workers wrote and what A traced.
	code, _, body = do(t, "GET", b.url+"/v1/preview/models/"+modelID+"/checkpoints", bearer, "")
	cks := jsonOf(t, code, body, 200)["data"].([]any)
	if len(cks) != 1 {
		t.Fatalf("checkpoints seen by B: %s", body)
	}
	ckID := cks[0].(map[string]any)["id"].(string)
	if _, err := os.Stat(filepath.Join(dirB, "cache", "checkpoints", ckID)); err == nil {
		t.Fatal("B had the checkpoint on disk before it was asked for it")
	}
	greedy := `{"model":"local/p/scale:step1","messages":[{"role":"user","content":"Capital of France?"}],"max_tokens":6,"temperature":0}`
	answerB := chatContent(t, b, bearer, greedy)
	if _, err := os.Stat(filepath.Join(dirB, "cache", "checkpoints", ckID, "adapter_model.safetensors")); err != nil {
		t.Fatalf("B's cache has no copy of the checkpoint it served: %v", err)
	}
	chatContent(t, b, bearer, `{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`) // the registered base model answers (200)
	code, _, body = do(t, "POST", b.url+"/call/read", basic("api", key), `{"project_id":"local/scale","id":"call-on-a"}`)
	if code != 200 || !strings.Contains(string(body), "from A") {
		t.Fatalf("the call traced on A, read on B: %d %s", code, body)
	}
	code, _, body = do(t, "POST", b.url+"/file/content", basic("api", key), `{"project_id":"local/scale","digest":"`+fileDigest+`"}`)
	if code != 200 || string(body) != "a file traced on A\n" {
		t.Fatalf("the trace file created on A, read on B: %d %q", code, body)
	}
	if rc := runKeys(context.Background(), []string{"revoke", "--data", filepath.Join(root, "keys"), "--db", dsn, key2}, &out, &errb); rc != 0 {
		t.Fatalf("keys revoke: %d %s", rc, errb.String())
	}
	if code, _, _ := do(t, "GET", b.url+"/v1/models", "Bearer "+key2, ""); code != 401 {
		t.Fatalf("a revoked key on B: %d", code)
	}

	// A base model registered while B runs is loaded by B without a restart.
	src2 := filepath.Join(root, "src-tiny2")
	if rc := runModels([]string{"synth", "--arch", "qwen2", "--preset", "tiny", "--out", src2}, &out, &errb); rc != 0 {
		t.Fatalf("models synth: %s", errb.String())
	}
	if rc := runModels([]string{"register", "--db", dsn, "--data", cli, "tiny2", src2}, &out, &errb); rc != 0 {
		t.Fatalf("models register: %s", errb.String())
	}
	if err := errors.Join(os.RemoveAll(src2), os.RemoveAll(cli)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(modelIDs(t, b, bearer), "tiny2"); {
		if time.Now().After(deadline) {
			t.Fatalf("B did not load the base model registered while it ran: %s", modelIDs(t, b, bearer))
		}
		time.Sleep(100 * time.Millisecond)
	}
	chatContent(t, b, bearer, `{"model":"tiny2","messages":[{"role":"user","content":"hi"}],"max_tokens":3}`)

	// 4. RL on B's rollouts of step 1, run by the surviving worker.
	code, _, body = do(t, "POST", b.url+"/v1/chat/completions", bearer, `{"model":"local/p/scale:step1","messages":[{"role":"user","content":"Say something"}],"max_tokens":6,"n":2,"seed":1,"logprobs":true,"return_token_ids":true}`)
	var trajs []string
	for i, c := range jsonOf(t, code, body, 200)["choices"].([]any) {
		cj, _ := json.Marshal(c)
		trajs = append(trajs, fmt.Sprintf(`{"messages_and_choices":[{"role":"user","content":"Say something"},%s],"reward":%d}`, cj, i))
	}
	code, _, body = do(t, "POST", b.url+"/v1/preview/training-jobs", bearer, `{"model_id":"`+modelID+`","trajectory_groups":[{"trajectories":[`+strings.Join(trajs, ",")+`]}],"experimental_config":{"learning_rate":0.001}}`)
	rl := jsonOf(t, code, body, 200)["id"].(string)
	if j := waitJob(t, b, bearer, rl); j["status"] != "SUCCEEDED" || j["step"] != float64(2) {
		t.Fatalf("the RL job: %v", j)
	}
	_ = survivor.Process.Signal(syscall.SIGTERM)
	_ = survivor.Wait()
	if err := os.RemoveAll(survivorDir); err != nil {
		t.Fatal(err)
	}

	// 5. A again, on its own directory: the same answers, the same models, the key refused.
	if err := os.Rename(hiddenA, dirA); err != nil {
		t.Fatal(err)
	}
	_, urlA, _ = startBinary(t, bin, dirA, serveArgs...)
	a = &server{url: urlA}
	if got := chatContent(t, a, bearer, greedy); got != answerB {
		t.Fatalf("step 1 greedy: A answers %q, B answered %q", got, answerB)
	}
	step2 := strings.Replace(greedy, ":step1", ":step2", 1)
	if got, want := chatContent(t, a, bearer, step2), chatContent(t, b, bearer, step2); got != want {
		t.Fatalf("step 2 greedy: A answers %q, B %q", got, want)
	}
	if code, _, _ := do(t, "GET", a.url+"/v1/models", "Bearer "+key2, ""); code != 401 {
		t.Fatalf("the key revoked through the store, on A: %d", code)
	}
	modelsA, modelsB := modelIDs(t, a, bearer), modelIDs(t, b, bearer)
	if modelsA != modelsB || !strings.Contains(modelsA, "local/p/scale") || !strings.Contains(modelsA, "tiny2") {
		t.Fatalf("/v1/models differ: A %s, B %s", modelsA, modelsB)
	}
	// A third node on an empty directory answers the same: a node needs nothing on disk.
	dirC := filepath.Join(root, "node-c")
	_, urlC, _ := startBinary(t, bin, dirC, serveArgs...)
	c := &server{url: urlC}
	if got, want := chatContent(t, c, bearer, step2), chatContent(t, b, bearer, step2); got != want {
		t.Fatalf("step 2 greedy on a node started empty: %q, B %q", got, want)
	}
	if modelIDs(t, c, bearer) != modelsB {
		t.Fatalf("/v1/models on a node started empty: %s, B %s", modelIDs(t, c, bearer), modelsB)
	}

	// hone export of step 2 (written by a worker whose directory is gone), through the blobs.
	exported := filepath.Join(root, "export")
	if rc := runExport(context.Background(), []string{"--data", dirA, "--db", dsn, "--model", "local/p/scale:step2", "--out", exported}, &out, &errb); rc != 0 {
		t.Fatalf("export: %s", errb.String())
	}
	if _, err := os.Stat(filepath.Join(exported, "model.safetensors")); err != nil {
		t.Fatalf("export wrote no weights: %v", err)
	}
	t.Logf("scale-out: 2 serve nodes, 2 workers (one killed mid-SFT), SFT and RL, in %.1fs", time.Since(started).Seconds())
}

// chatContent answers the content of a chat completion's first choice.
func chatContent(t *testing.T, s *server, bearer, req string) string {
	t.Helper()
	code, _, body := do(t, "POST", s.url+"/v1/chat/completions", bearer, req)
	c := jsonOf(t, code, body, 200)["choices"].([]any)[0].(map[string]any)
	return c["message"].(map[string]any)["content"].(string)
}

// modelIDs lists /v1/models' ids, sorted (a node lists base models in the order it loaded
// them, so one that loaded a model while running lists it later than one that started
// with it).
func modelIDs(t *testing.T, s *server, bearer string) string {
	t.Helper()
	code, _, body := do(t, "GET", s.url+"/v1/models", bearer, "")
	var ids []string
	for _, m := range jsonOf(t, code, body, 200)["data"].([]any) {
		ids = append(ids, m.(map[string]any)["id"].(string))
	}
	sort.Strings(ids)
	return strings.Join(ids, ",")
}

// leaseOwner returns the pid of the process holding a running job's lease (its owner is
// host/pid/worker).
func leaseOwner(t *testing.T, dsn, job string) int {
	t.Helper()
	owner := leaseOwnerAfter(t, dsn, job)
	parts := strings.Split(owner, "/") // host/pid/worker
	if len(parts) < 2 {
		t.Fatalf("lease owner %q", owner)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil {
		t.Fatalf("lease owner %q", owner)
	}
	return n
}

func leaseOwnerAfter(t *testing.T, dsn, job string) string {
	t.Helper()
	d, err := db.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	var owner *string
	if err := d.QueryRow(context.Background(), `SELECT lease_owner FROM train_jobs WHERE id = ?`, job).Scan(&owner); err != nil {
		t.Fatal(err)
	}
	if owner == nil {
		return ""
	}
	return *owner
}

// createTraceFile sends /file/create (multipart) and returns the file's digest.
func createTraceFile(t *testing.T, url, key, project string, content []byte) string {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("project_id", project)
	fw, _ := mw.CreateFormFile("file", "notes.txt")
	_, _ = fw.Write(content)
	mw.Close()
	req, _ := http.NewRequest("POST", url+"/file/create", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", basic("api", key))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var res struct{ Digest string }
	if resp.StatusCode != 200 || json.Unmarshal(body, &res) != nil || res.Digest == "" {
		t.Fatalf("file/create: %d %s", resp.StatusCode, body)
	}
	return res.Digest
}
