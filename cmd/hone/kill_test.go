package main

// The kill half of the fuzz and fault suite (docs/reliability.md "Fuzz and fault suite"):
// `kill -9` of the real binary during trace ingest and during an SFT job. SIGTERM is covered
// by TestBinaryStopsOnSIGTERM, TestShutdownDuringTrainingRestarts and
// TestWorkerSIGTERMDuringTraining.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/honeai/hone/internal/safetensors"
)

// startBinary starts `hone serve` (the built binary) and returns it with its URL.
func startBinary(t testing.TB, bin, dir string, args ...string) (*exec.Cmd, string, *syncBuffer) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--data", dir, "--addr", "127.0.0.1:0", "--log-level", "warn"}, args...)...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	deadline := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("serve exited before listening:\n%s", stderr.String())
			}
			if _, addr, found := strings.Cut(l, "listening on "); found {
				go func() {
					for range lines {
					}
				}()
				return cmd, strings.TrimSpace(addr), stderr
			}
		case <-deadline:
			t.Fatalf("serve did not listen:\n%s", stderr.String())
		}
	}
}

// TestKillServerDuringIngest: `kill -9` of `hone serve` while four clients write calls
// (/call/start then /call/end), three times on the same data directory (and store), then a
// SIGTERM under the same load (exit 0); after the last restart every acknowledged start is
// stored and every acknowledged end has ended_at.
func TestKillServerDuringIngest(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		args := append([]string{"--train-workers", "0", "--max-concurrent-per-key", "0"}, st.args...)
		var (
			mu              sync.Mutex
			started, ended  = map[string]bool{}, map[string]bool{}
			kills, attempts int
		)
		const rounds = 4
		var url string
		for round := 0; round <= rounds; round++ {
			cmd, u, stderr := startBinary(t, bin, dir, args...)
			url = u
			if round == rounds {
				break // the last start only reads back
			}
			authz := basic("api", initialKey(t, dir))
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for g := 0; g < 4; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					client := newNoRetryClient()
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						id := fmt.Sprintf("r%d-g%d-%d", round, g, i)
						mu.Lock()
						attempts++
						mu.Unlock()
						start := fmt.Sprintf(`{"start":{"project_id":"local/kill","id":%q,"trace_id":%q,"op_name":"op","started_at":"2025-01-01T00:00:00Z","attributes":{},"inputs":{"i":%d,"pad":%q}}}`, id, id, i, strings.Repeat("x", 512))
						if postStatus(client, url+"/call/start", authz, start) != 200 {
							continue
						}
						mu.Lock()
						started[id] = true
						mu.Unlock()
						end := fmt.Sprintf(`{"end":{"project_id":"local/kill","id":%q,"ended_at":"2025-01-01T00:00:01Z","output":%d,"summary":{}}}`, id, i)
						if postStatus(client, url+"/call/end", authz, end) == 200 {
							mu.Lock()
							ended[id] = true
							mu.Unlock()
						}
					}
				}()
			}
			time.Sleep(1500 * time.Millisecond)
			// kill -9 in every round but the last, which stops it with SIGTERM: exit 0,
			// and what it acknowledged while stopping is kept too.
			sig := syscall.SIGKILL
			if round == rounds-1 {
				sig = syscall.SIGTERM
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			err := cmd.Wait()
			close(stop)
			wg.Wait()
			if sig == syscall.SIGTERM && err != nil {
				t.Errorf("SIGTERM during ingest: %v\n%s", err, stderr.String())
			}
			kills++
			if strings.Contains(stderr.String(), "panic") {
				t.Errorf("round %d: %s", round, stderr.String())
			}
		}
		// Read every acknowledged call back.
		authz := basic("api", initialKey(t, dir))
		ids := sortedKeys(started)
		stored, closed := map[string]bool{}, map[string]bool{}
		for i := 0; i < len(ids); i += 500 {
			chunk := ids[i:min(i+500, len(ids))]
			q, _ := json.Marshal(map[string]any{"project_id": "local/kill", "filter": map[string]any{"call_ids": chunk}, "limit": len(chunk)})
			code, _, body := do(t, "POST", url+"/calls/query", authz, string(q))
			if code != 200 {
				t.Fatalf("calls/query: %d %.300s", code, body)
			}
			var res struct {
				Calls []struct {
					ID      string  `json:"id"`
					EndedAt *string `json:"ended_at"`
				} `json:"calls"`
			}
			if err := json.Unmarshal(body, &res); err != nil {
				t.Fatal(err)
			}
			for _, c := range res.Calls {
				stored[c.ID] = true
				if c.EndedAt != nil {
					closed[c.ID] = true
				}
			}
		}
		lostStarts, lostEnds := 0, 0
		for id := range started {
			if !stored[id] {
				lostStarts++
				if lostStarts < 5 {
					t.Errorf("acknowledged start %s lost", id)
				}
			}
		}
		for id := range ended {
			if !closed[id] {
				lostEnds++
				if lostEnds < 5 {
					t.Errorf("acknowledged end %s lost", id)
				}
			}
		}
		t.Logf("kill -9 (and a last SIGTERM) during ingest (%s): %d kills survived, %d writes attempted, %d starts and %d ends acknowledged, %d starts and %d ends lost",
			st.name, kills, attempts, len(started), len(ended), lostStarts, lostEnds)
		if len(started) < 100 {
			t.Errorf("only %d starts acknowledged: the kill did not happen under load", len(started))
		}
	})
}

// TestKillWorkerDuringSFT: `kill -9` of a `hone worker` in the middle of an SFT job, and of
// one in the middle of an RL job; the job stays claimed until its lease (--job-lease 2s) runs
// out, then a second worker runs it to an end (SUCCEEDED, or FAILED with a message); no
// checkpoint is ever listed that is not whole and finite, the trained checkpoint answers a
// chat completion, and the events of the second run say attempt 2.
func TestKillWorkerDuringSFT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		lease := []string{"--job-lease", "2s"}
		s := startServer(t, dir, append(append([]string{"--train-workers", "0"}, lease...), st.args...)...)
		bearer := "Bearer " + initialKey(t, dir)
		for _, kind := range []string{"sft", "rl"} {
			t.Run(kind, func(t *testing.T) { killWorkerDuringJob(t, bin, st, s, bearer, dir, kind) })
		}
	})
}

func killWorkerDuringJob(t *testing.T, bin string, st faultStore, s *server, bearer, dir, kind string) {
	lease := []string{"--job-lease", "2s"}
	name := "kill-" + kind
	var job string
	if kind == "sft" {
		job = newSFTJob(t, s, bearer, name, 40)
	} else {
		job = newRLJob(t, s, bearer, name)
	}
	code, _, body := do(t, "GET", s.url+"/v1/preview/training-jobs/"+job, bearer, "")
	modelID, _ := jsonOf(t, code, body, 200)["model_id"].(string)
	worker := func() *exec.Cmd {
		// --sft-save-every 1ms: the SFT job saves its resume state after every step.
		cmd := exec.Command(bin, append(append([]string{"worker", "--data", dir, "--log-level", "warn", "--sft-save-every", "1ms"}, lease...), st.args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	w := worker()
	if kind == "sft" {
		// After two steps, the first one's state is saved (the second step starts after it).
		waitEvents(t, s, bearer, job, "gradient_step", 2)
	} else { // one gradient step: kill it while it is being computed
		waitEvent(t, s, bearer, job, "training_started")
	}
	killed := time.Now()
	_ = w.Process.Signal(syscall.SIGKILL)
	_ = w.Wait()
	checkCheckpoints(t, s, bearer, dir, modelID)
	code, _, body = do(t, "GET", s.url+"/v1/preview/training-jobs/"+job, bearer, "")
	if j := jsonOf(t, code, body, 200); j["status"] != "RUNNING" && j["status"] != "QUEUED" {
		t.Fatalf("after kill -9 the job is %v: it was not killed mid-job", j["status"])
	}
	w = worker()
	j := waitJob(t, s, bearer, job)
	_ = w.Process.Signal(syscall.SIGTERM)
	_ = w.Wait()
	t.Logf("kill -9 of a worker during %s (%s): the job ended %v %.2fs after the kill", kind, st.name, j["status"], time.Since(killed).Seconds())
	switch j["status"] {
	case "SUCCEEDED":
	case "FAILED":
		if fmt.Sprint(j["error"]) == "" {
			t.Fatalf("failed without a message: %v", j)
		}
	default:
		t.Fatalf("job %v", j)
	}
	types, attempts := jobEventsAttempts(t, s, bearer, job)
	if j["attempt"] != float64(2) || attempts[len(attempts)-1] != 2 || attempts[0] != 1 {
		t.Fatalf("job attempt %v; events %v of attempts %v", j["attempt"], types, attempts)
	}
	if kind == "sft" && j["status"] == "SUCCEEDED" {
		if n := checkResumedSteps(t, jobEventList(t, s, bearer, job), 3*40, true); n != 1 {
			t.Fatalf("the second run did not resume (%d)", n)
		}
	}
	for _, step := range checkCheckpoints(t, s, bearer, dir, modelID) {
		code, _, body := do(t, "POST", s.url+"/v1/chat/completions", bearer, fmt.Sprintf(`{"model":"local/p/%s:step%d","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, name, step))
		if code != 200 {
			t.Errorf("chat with step %d: %d %s", step, code, body)
		}
	}
}

// newRLJob creates a model and queues one RL step large enough to take a while on the demo
// model (16 groups of 4 trajectories with different rewards).
func newRLJob(t *testing.T, s *server, bearer, name string) string {
	t.Helper()
	u := s.url + "/v1/preview"
	code, _, body := do(t, "POST", u+"/models", bearer, `{"project":"p","name":"`+name+`","base_model":"demo"}`)
	id := jsonOf(t, code, body, 200)["id"].(string)
	long := strings.Repeat("Paris is the capital of France, and it is on the Seine. ", 8)
	var groups []string
	for g := 0; g < 16; g++ {
		var trajs []string
		for i := 0; i < 4; i++ {
			trajs = append(trajs, fmt.Sprintf(`{"messages_and_choices":[{"role":"user","content":"Question %d: capital of France?"},{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":%q}}],"reward":%d}`, g, fmt.Sprint(i, long), i))
		}
		groups = append(groups, `{"trajectories":[`+strings.Join(trajs, ",")+`]}`)
	}
	code, _, body = do(t, "POST", u+"/training-jobs", bearer, `{"model_id":"`+id+`","trajectory_groups":[`+strings.Join(groups, ",")+`],"experimental_config":{"allow_training_without_logprobs":true,"learning_rate":1e-3}}`)
	return jsonOf(t, code, body, 200)["id"].(string)
}

// waitEvent waits until the job has an event of type typ.
func waitEvent(t *testing.T, s *server, bearer, id, typ string) {
	t.Helper()
	waitEvents(t, s, bearer, id, typ, 1)
}

// waitEvents waits until the job has n events of type typ.
func waitEvents(t *testing.T, s *server, bearer, id, typ string, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if count(jobEvents(t, s, bearer, id), typ) >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("not %d %s events", n, typ)
}

// checkCheckpoints checks every checkpoint the API lists for model: its adapter file is whole
// (it opens) and every value is finite. It returns the steps.
func checkCheckpoints(t *testing.T, s *server, bearer, dir, model string) []int {
	t.Helper()
	code, _, body := do(t, "GET", s.url+"/v1/preview/models/"+model+"/checkpoints", bearer, "")
	page := jsonOf(t, code, body, 200)
	data, _ := page["data"].([]any)
	var steps []int
	for _, c := range data {
		step := int(c.(map[string]any)["step"].(float64))
		steps = append(steps, step)
		path := filepath.Join(dir, "checkpoints", model, fmt.Sprintf("step%d", step), "adapter_model.safetensors")
		if _, err := os.Stat(path); err != nil {
			// On PostgreSQL the files are blobs (docs/deploy.md): read through the node's
			// cache, where a chat completion with the step puts them together.
			path = cachedCheckpoint(t, s, bearer, dir, model, step, c.(map[string]any)["id"].(string))
		}
		f, err := safetensors.Open(path)
		if err != nil {
			t.Fatalf("listed checkpoint step %d does not open: %v", step, err)
		}
		for _, name := range f.Names() {
			tn, _ := f.Tensor(name)
			v, err := tn.F32()
			if err != nil {
				t.Fatalf("step %d %s: %v", step, name, err)
			}
			for _, x := range v {
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					t.Fatalf("listed checkpoint step %d has a non-finite value in %s", step, name)
				}
			}
		}
		f.Close()
	}
	return steps
}

func newNoRetryClient() *http.Client { return &http.Client{Timeout: 10 * time.Second} }

// postStatus sends a JSON body and returns the status, 0 when no answer came (the server was killed).
func postStatus(c *http.Client, url, authz, body string) int {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Authorization", authz)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestKillDuringFirstStart: `kill -9` of the very first `hone serve` on an empty data
// directory at several moments of its start (creating the store and the first key, writing
// the demo model); each directory must then start and answer a chat completion with the demo
// model and the initial key.
func TestKillDuringFirstStart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	for _, delay := range []time.Duration{5, 20, 50, 100, 200, 400} {
		delay *= time.Millisecond
		dir := t.TempDir()
		cmd := exec.Command(bin, "serve", "--data", dir, "--addr", "127.0.0.1:0", "--log-level", "warn")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		cmd2, url, stderr := startBinary(t, bin, dir, "--train-workers", "0")
		bearer := "Bearer " + initialKey(t, dir)
		code := postStatus(newNoRetryClient(), url+"/v1/chat/completions", bearer, `{"model":"demo","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
		if code != 200 {
			t.Fatalf("killed %v into its first start: the next start answers chat %d\n%s", delay, code, stderr.String())
		}
		_ = cmd2.Process.Signal(syscall.SIGTERM)
		_ = cmd2.Wait()
	}
}

// TestKillServerDuringTraining: `kill -9` of `hone serve` (training in its own worker) in the
// middle of an SFT job and of an RL step; after a restart the job runs again when its lease
// (--job-lease 2s) has run out and ends (the SFT job from the last state it saved), its
// second run's events say attempt 2, and every listed checkpoint is whole, finite and
// answers chat.
func TestKillServerDuringTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		dir := t.TempDir()
		// --sft-save-every 1ms: the SFT job saves its resume state after every step.
		args := append([]string{"--job-lease", "2s", "--sft-save-every", "1ms"}, st.args...)
		cmd, url, _ := startBinary(t, bin, dir, args...)
		s := &server{url: url}
		bearer := "Bearer " + initialKey(t, dir)
		for _, kind := range []string{"sft", "rl"} {
			name := "srv-kill-" + kind
			var job string
			if kind == "sft" {
				job = newSFTJob(t, s, bearer, name, 40)
				waitEvents(t, s, bearer, job, "gradient_step", 2)
			} else {
				job = newRLJob(t, s, bearer, name)
				waitEvent(t, s, bearer, job, "training_started")
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			cmd, url, _ = startBinary(t, bin, dir, args...)
			s.url = url
			j := waitJob(t, s, bearer, job)
			types, attempts := jobEventsAttempts(t, s, bearer, job)
			if j["status"] != "SUCCEEDED" || j["attempt"] != float64(2) || attempts[len(attempts)-1] != 2 {
				t.Fatalf("%s after kill -9 of the server: %v; events %v of attempts %v", kind, j, types, attempts)
			}
			modelID, _ := j["model_id"].(string)
			if kind == "sft" && j["status"] == "SUCCEEDED" {
				if n := checkResumedSteps(t, jobEventList(t, s, bearer, job), 3*40, true); n != 1 {
					t.Fatalf("the second run did not resume (%d)", n)
				}
			}
			for _, step := range checkCheckpoints(t, s, bearer, dir, modelID) {
				code, _, body := do(t, "POST", s.url+"/v1/chat/completions", bearer, fmt.Sprintf(`{"model":"local/p/%s:step%d","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`, name, step))
				if code != 200 {
					t.Errorf("chat with step %d: %d %s", step, code, body)
				}
			}
		}
	})
}

// cachedCheckpoint returns the adapter file of a checkpoint kept as blobs, as the node with
// data directory dir put it together for a chat completion with it.
func cachedCheckpoint(t *testing.T, s *server, bearer, dir, model string, step int, id string) string {
	t.Helper()
	code, _, body := do(t, "GET", s.url+"/v1/preview/models/"+model, bearer, "")
	m := jsonOf(t, code, body, 200)
	name := fmt.Sprintf("%v/%v/%v:step%d", m["entity"], m["project"], m["name"], step)
	code, _, body = do(t, "POST", s.url+"/v1/chat/completions", bearer, fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"hi"}],"max_tokens":1}`, name))
	if code != 200 {
		t.Fatalf("chat with %s: %d %s", name, code, body)
	}
	return filepath.Join(dir, "cache", "checkpoints", id, "adapter_model.safetensors")
}
