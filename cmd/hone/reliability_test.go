package main

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/honeai/hone/internal/safetensors"
)

// TestDemoModelInterruptedWrite: a first start killed while writing the demo model left
// models/demo with config.json and only a temporary weights file (and, with atomic writes, a
// .tmp-demo-* directory); the next start cleans that up, writes the model again and serves.
func TestDemoModelInterruptedWrite(t *testing.T) {
	dir := t.TempDir()
	demo := filepath.Join(dir, "models", "demo")
	if err := os.MkdirAll(demo, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(demo, "config.json"), []byte(`{"model_type":"llama"}`), 0o644)
	os.WriteFile(filepath.Join(demo, ".tmp-model.safetensors-123456"), []byte("half"), 0o644)
	left := filepath.Join(dir, "models", demoTmpPrefix+"987")
	os.MkdirAll(left, 0o755)
	os.WriteFile(filepath.Join(left, "config.json"), []byte(`{}`), 0o644)

	s := startServer(t, dir)
	if !strings.Contains(s.stdout.String(), "wrote the demo model") {
		t.Fatalf("the demo model was not written again: %s", s.stdout)
	}
	bearer := "Bearer " + initialKey(t, dir)
	code, _, body := do(t, "POST", s.url+"/v1/chat/completions", bearer, `{"model":"demo","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	jsonOf(t, code, body, 200)
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("the interrupted write's directory is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(demo, ".tmp-model.safetensors-123456")); !os.IsNotExist(err) {
		t.Fatalf("the half-written weights are still there: %v", err)
	}
	s.stop(t)
	// A whole model is kept as it is.
	s = startServer(t, dir)
	if strings.Contains(s.stdout.String(), "wrote the demo model") {
		t.Fatal("a whole demo model was written again")
	}
}

// jobEvents lists a job's event types.
func jobEvents(t *testing.T, s *server, bearer, id string) []string {
	t.Helper()
	types, _ := jobEventsAttempts(t, s, bearer, id)
	return types
}

// jobEventsAttempts lists a job's event types and each event's data.attempt (0 if none).
func jobEventsAttempts(t *testing.T, s *server, bearer, id string) ([]string, []int) {
	t.Helper()
	var types []string
	var attempts []int
	for _, ev := range jobEventList(t, s, bearer, id) {
		types = append(types, ev["type"].(string))
		a, _ := ev["data"].(map[string]any)["attempt"].(float64)
		attempts = append(attempts, int(a))
	}
	return types, attempts
}

// jobEventList lists a job's events, every page.
func jobEventList(t *testing.T, s *server, bearer, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for after := ""; ; {
		code, _, body := do(t, "GET", s.url+"/v1/preview/training-jobs/"+id+"/events?limit=100&after="+after, bearer, "")
		page := jsonOf(t, code, body, 200)
		data := page["data"].([]any)
		for _, e := range data {
			out = append(out, e.(map[string]any))
		}
		if page["has_more"] != true || len(data) == 0 {
			return out
		}
		after = data[len(data)-1].(map[string]any)["id"].(string)
	}
}

// checkResumedSteps checks that each run of an SFT job of steps steps after the first went
// on from where the previous one stopped (a training_resumed event, then the next step
// numbers), so that every step was trained exactly once; it returns how many runs resumed.
// With redo, a run may resume from an earlier step than the last one reported (a worker
// killed after a step and before its state was saved), but never from step 0.
func checkResumedSteps(t *testing.T, evs []map[string]any, steps int, redo bool) int {
	t.Helper()
	next, resumed := 1, 0
	for _, ev := range evs {
		data, _ := ev["data"].(map[string]any)
		switch ev["type"] {
		case "training_resumed":
			from, _ := data["from_step"].(float64)
			if int(from) != next-1 && !(redo && from >= 1 && int(from) < next) || data["num_sequences"] != float64(steps) {
				t.Fatalf("resumed from step %v of %v after step %d", data["from_step"], data["num_sequences"], next-1)
			}
			next = int(from) + 1
			resumed++
		case "gradient_step":
			if data["step"] != float64(next) {
				t.Fatalf("gradient step %v, want %d (a step trained twice or skipped)", data["step"], next)
			}
			next++
		}
	}
	if next != steps+1 {
		t.Fatalf("%d steps trained, want %d", next-1, steps)
	}
	return resumed
}

func count(xs []string, x string) int {
	n := 0
	for _, v := range xs {
		if v == x {
			n++
		}
	}
	return n
}

// waitSteps waits until the job's current attempt (after its interrupted ones) has made a
// gradient step.
func waitSteps(t *testing.T, s *server, bearer, id string, interrupted int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		types := jobEvents(t, s, bearer, id)
		last := -1
		for i, ty := range types {
			if ty == "training_interrupted" {
				last = i
			}
		}
		if count(types, "training_interrupted") == interrupted && count(types[last+1:], "gradient_step") > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no gradient step of attempt %d", interrupted+1)
}

// newSFTJob creates a model and queues an SFT job of steps steps (sftData, batch size 1).
func newSFTJob(t *testing.T, s *server, bearer, name string, epochs int) string {
	t.Helper()
	u := s.url + "/v1/preview"
	code, _, body := do(t, "POST", u+"/models", bearer, `{"project":"p","name":"`+name+`","base_model":"demo"}`)
	id := jsonOf(t, code, body, 200)["id"].(string)
	code, _, body = do(t, "POST", u+"/files", bearer, sftData)
	url := jsonOf(t, code, body, 200)["url"].(string)
	code, _, body = do(t, "POST", u+"/sft-training-jobs", bearer, fmt.Sprintf(`{"model_id":%q,"training_data_url":%q,"config":{"learning_rate":0.001,"epochs":%d,"batch_size":1}}`, id, url, epochs))
	return jsonOf(t, code, body, 200)["id"].(string)
}

// TestShutdownDuringTrainingRestarts: three clean shutdowns of `hone serve` in a row, each
// in the middle of an SFT job, exit 0; each hands the job back to the queue at once (a
// training_interrupted event; the next start runs it without waiting for the lease), each
// next run goes on from the step the shutdown stopped at (training_resumed; every step is
// trained once), and the job then completes instead of failing for its attempts.
func TestShutdownDuringTrainingRestarts(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	job := newSFTJob(t, s, bearer, "restarts", 40)
	for i := 0; i < 3; i++ {
		waitSteps(t, s, bearer, job, i)
		if code := s.stop(t); code != 0 {
			t.Fatalf("shutdown %d exited %d", i+1, code)
		}
		s = startServer(t, dir)
	}
	j := waitJob(t, s, bearer, job)
	if j["status"] != "SUCCEEDED" || j["step"] != float64(1) {
		t.Fatalf("after three restarts the job is %v", j)
	}
	types, attempts := jobEventsAttempts(t, s, bearer, job)
	if n := count(types, "training_interrupted"); n != 3 || types[len(types)-1] != "training_ended" {
		t.Fatalf("events %v", types)
	}
	// Each run's events name it: 1 until the first interruption, ..., 4 for the last run.
	run := 1
	for i, ty := range types {
		if attempts[i] != run {
			t.Fatalf("event %d (%s) of run %d says attempt %d: %v %v", i, ty, run, attempts[i], types, attempts)
		}
		if ty == "training_interrupted" {
			run++
		}
	}
	if j["attempt"] != float64(4) {
		t.Fatalf("job attempt %v", j["attempt"])
	}
	if n := checkResumedSteps(t, jobEventList(t, s, bearer, job), 3*40, false); n != 3 {
		t.Fatalf("%d of 3 runs resumed", n)
	}
	// `hone jobs watch` counts the steps on from where each run resumed.
	var out, errb bytes.Buffer
	if code := runJobs(context.Background(), []string{"watch", "--url", s.url, "--data", dir, job}, &out, &errb); code != 0 {
		t.Fatalf("watch: exit %d %s", code, errb.String())
	}
	next := 1
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.HasPrefix(line, "step ") && !strings.HasPrefix(line, fmt.Sprintf("step %d/120 ", next)) {
			t.Fatalf("watch printed %q where step %d was next:\n%s", line, next, out.String())
		} else if strings.HasPrefix(line, "step ") {
			next++
		}
	}
	if next != 121 || strings.Count(out.String(), "resumed after step") != 3 || strings.Count(out.String(), "the job runs again") != 3 {
		t.Fatalf("watch:\n%s", out.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "checkpoints", j["model_id"].(string), "resume")); err == nil {
		if es, _ := os.ReadDir(filepath.Join(dir, "checkpoints", j["model_id"].(string), "resume")); len(es) > 0 {
			t.Fatalf("the finished job's resume state is left: %v", es)
		}
	}
}

// TestWorkerSIGTERMDuringTraining: SIGTERM to a `hone worker` process in the middle of an SFT
// job (the real binary, three times) exits 0 with no crash, and the job is queued again at
// once; a last worker completes it.
func TestWorkerSIGTERMDuringTraining(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	s := startServer(t, dir, "--train-workers", "0")
	bearer := "Bearer " + initialKey(t, dir)
	job := newSFTJob(t, s, bearer, "sigterm", 40)
	for i := 0; ; i++ {
		cmd := exec.Command(bin, "worker", "--data", dir)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if i == 3 {
			j := waitJob(t, s, bearer, job)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			_ = cmd.Wait()
			if j["status"] != "SUCCEEDED" {
				t.Fatalf("job %v", j)
			}
			break
		}
		waitSteps(t, s, bearer, job, i)
		_ = cmd.Process.Signal(syscall.SIGTERM)
		err := cmd.Wait()
		if err != nil || strings.Contains(stderr.String(), "fatal error") || strings.Contains(stderr.String(), "panic") {
			t.Fatalf("worker %d: %v\n%s", i+1, err, stderr.String())
		}
		code, _, body := do(t, "GET", s.url+"/v1/preview/training-jobs/"+job, bearer, "")
		if j := jsonOf(t, code, body, 200); j["status"] != "QUEUED" {
			t.Fatalf("after SIGTERM %d the job is %v, not queued again", i+1, j["status"])
		}
	}
	if n := checkResumedSteps(t, jobEventList(t, s, bearer, job), 3*40, false); n != 3 {
		t.Fatalf("%d of 3 runs resumed", n)
	}
}

// TestDivergenceRefused: hyperparameters that can only diverge are a 400 naming the field
// when the job is created; a checkpoint whose values are not finite (as a Hone that did not
// check could write) is answered with a 400 naming it, with or without logprobs, and logged,
// never a 500 or NUL characters.
func TestDivergenceRefused(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	u := s.url + "/v1/preview"
	code, _, body := do(t, "POST", u+"/models", bearer, `{"project":"p","name":"nan","base_model":"demo"}`)
	id := jsonOf(t, code, body, 200)["id"].(string)
	code, _, body = do(t, "POST", u+"/files", bearer, sftData)
	url := jsonOf(t, code, body, 200)["url"].(string)
	for _, tc := range []struct{ body, param string }{
		{`"config":{"learning_rate":1e308}`, "config.learning_rate"},
		{`"experimental_config":{"weight_decay":1e308}`, "experimental_config.weight_decay"},
		{`"experimental_config":{"weight_decay":-1e308}`, "experimental_config.weight_decay"},
		{`"experimental_config":{"max_grad_norm":1e308}`, "experimental_config.max_grad_norm"},
	} {
		code, _, body = do(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"`+id+`","training_data_url":"`+url+`",`+tc.body+`}`)
		if e := envelope(t, body); code != 400 || e.Param == nil || *e.Param != tc.param {
			t.Fatalf("%s: %d %s", tc.body, code, body)
		}
	}
	code, _, body = do(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"`+id+`","training_data_url":"`+url+`"}`)
	job := jsonOf(t, code, body, 200)["id"].(string)
	if j := waitJob(t, s, bearer, job); j["status"] != "SUCCEEDED" {
		t.Fatalf("job %v", j)
	}
	path := filepath.Join(dir, "checkpoints", id, "step1", "adapter_model.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, name := range f.Names() {
		tn, _ := f.Tensor(name)
		v, _ := tn.F32()
		v = append([]float32(nil), v...)
		v[0] = float32(math.NaN())
		ts = append(ts, safetensors.FromF32(name, tn.Shape, v))
	}
	f.Close()
	if err := safetensors.Write(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	for _, extra := range []string{``, `,"logprobs":true,"top_logprobs":2`} {
		code, _, body = do(t, "POST", s.url+"/v1/chat/completions", bearer, `{"model":"local/p/nan:step1","messages":[{"role":"user","content":"hi"}],"max_tokens":4`+extra+`}`)
		if e := envelope(t, body); code != 400 || !strings.Contains(e.Message, "not finite") || strings.Contains(string(body), `\u0000`) {
			t.Fatalf("chat with a non-finite checkpoint: %d %s", code, body)
		}
	}
}
