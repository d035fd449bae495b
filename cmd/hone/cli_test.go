package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/client"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/trainapi"
	"github.com/honeai/hone/internal/training"
)

// run calls a subcommand's function with captured output.
func runCmd(fn func(args []string, stdout, stderr io.Writer) int, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := fn(args, &out, &errb)
	return code, out.String(), errb.String()
}

var (
	trainCmd = func(a []string, o, e io.Writer) int { return runTrain(context.Background(), a, o, e) }
	jobsCmd  = func(a []string, o, e io.Writer) int { return runJobs(context.Background(), a, o, e) }
	serveCmd = func(a []string, o, e io.Writer) int { return runServe(context.Background(), a, o, e, nil) }
	workCmd  = func(a []string, o, e io.Writer) int { return runWorker(context.Background(), a, o, e, nil) }
	keysCmd  = func(a []string, o, e io.Writer) int { return runKeys(context.Background(), a, o, e) }
)

// TestHelp: every command's --help exits 0 on stdout under its own name; the flags shown are
// the command's own, with the real defaults.
func TestHelp(t *testing.T) {
	for _, c := range []struct {
		name    string
		fn      func([]string, io.Writer, io.Writer) int
		args    []string
		want    []string
		notWant []string
	}{
		{"serve", serveCmd, []string{"--help"}, []string{"usage: hone serve", "-train-workers int", "-addr string"}, []string{"hone worker on", "Usage of"}},
		{"worker", workCmd, []string{"--help"}, []string{"usage: hone worker", "-train-workers"}, []string{"Usage of serve"}},
		{"train", trainCmd, []string{"--help"}, []string{"hone train sft", "hone train rl"}, nil},
		{"train sft", trainCmd, []string{"sft", "--help"}, []string{"usage: hone train sft", "learning rate (default 0.0001)", "passes over the data (default 3)", "API's own defaults", "-file"}, []string{"-groups", "-loss", "1e-05"}},
		{"train rl", trainCmd, []string{"rl", "-h"}, []string{"usage: hone train rl", "learning rate (default 5e-06)", "-allow-training-without-logprobs", "-groups"}, []string{"-file", "-epochs", "1e-05"}},
		{"jobs", jobsCmd, []string{"--help"}, []string{"hone jobs list", "hone jobs cancel"}, nil},
		{"jobs list", jobsCmd, []string{"list", "--help"}, []string{"-status", "-limit"}, nil},
		{"keys", keysCmd, []string{"--help"}, []string{"hone keys create"}, nil},
		{"keys create", keysCmd, []string{"create", "--help"}, []string{"-entity"}, nil},
		{"models", func(a []string, o, e io.Writer) int { return runModels(a, o, e) }, []string{"synth", "--help"}, []string{"-arch"}, nil},
	} {
		code, out, errs := runCmd(c.fn, c.args...)
		if code != 0 || errs != "" {
			t.Errorf("%s %v: exit %d, stderr %q", c.name, c.args, code, errs)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s --help lacks %q:\n%s", c.name, w, out)
			}
		}
		for _, w := range c.notWant {
			if strings.Contains(out, w) {
				t.Errorf("%s --help shows %q:\n%s", c.name, w, out)
			}
		}
	}
}

// TestMistypedFlag: the error comes first with the closest flag, not under the usage.
func TestMistypedFlag(t *testing.T) {
	for _, c := range []struct {
		fn   func([]string, io.Writer, io.Writer) int
		args []string
		want string
	}{
		{trainCmd, []string{"sft", "--epoch", "3"}, "--epochs"},
		{trainCmd, []string{"rl", "--group", "g.json"}, "--groups"},
		{serveCmd, []string{"--adr", ":1"}, "--addr"},
		{workCmd, []string{"--train-worker", "2"}, "--train-workers"},
		{jobsCmd, []string{"list", "--statu", "QUEUED"}, "--status"},
		{keysCmd, []string{"list", "--dta", "x"}, "--data"},
	} {
		code, out, errs := runCmd(c.fn, c.args...)
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		if code != 2 || out != "" || len(lines) != 3 || !strings.Contains(lines[0], "flag provided but not defined") ||
			lines[1] != "Did you mean "+c.want+"?" || !strings.Contains(lines[2], "--help") {
			t.Errorf("%v: exit %d, stdout %q, stderr:\n%s", c.args, code, out, errs)
		}
	}
}

// TestNoServer: a client command where nothing listens says so and how to start one; a second
// server on a busy port names --addr.
func TestNoServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	file := filepath.Join(t.TempDir(), "d.jsonl")
	os.WriteFile(file, []byte(sftData), 0o644)
	for _, args := range [][]string{
		{"sft", "--url", "http://" + addr, "--key", "k", "--model", "local/p/m", "--file", file},
		{"list", "--url", "http://" + addr, "--key", "k"},
	} {
		fn := trainCmd
		if args[0] == "list" {
			fn = jobsCmd
		}
		code, _, errs := runCmd(fn, args...)
		if code != 1 || !strings.Contains(errs, "no Hone server answers at http://"+addr) || !strings.Contains(errs, "hone serve") || strings.Contains(errs, "connection refused") {
			t.Errorf("%v: exit %d, stderr %q", args, code, errs)
		}
	}

	dir := t.TempDir()
	s := startServer(t, dir)
	busy := strings.TrimPrefix(s.url, "http://")
	other := t.TempDir()
	code, _, errs := runCmd(serveCmd, "--addr", busy, "--data", other)
	if code != 1 || !strings.Contains(errs, busy+" is already in use") || !strings.Contains(errs, "--addr") {
		t.Errorf("busy port: exit %d, stderr %q", code, errs)
	}
	if entries, _ := os.ReadDir(other); len(entries) != 0 {
		t.Errorf("a server on a busy port wrote its data directory: %v", entries)
	}
}

// TestTrainCLIAsANewUser: the walkthrough's commands on a server whose only base model is not
// demo: an existing model needs no --base, bad data is refused before anything is created,
// progress has no carriage returns off a terminal, the last line says what the step is, RL
// groups with equal rewards are skipped without failing, and jobs can be listed and cancelled.
func TestTrainCLIAsANewUser(t *testing.T) {
	base := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(base, synth.Tiny("llama")); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := startServer(t, dir, "--no-demo-model", "--model", "tiny="+base)
	bearer := "Bearer " + initialKey(t, dir)
	cli := []string{"--url", s.url, "--data", dir}
	file := filepath.Join(t.TempDir(), "d.jsonl")
	os.WriteFile(file, []byte(sftData), 0o644)

	// Bad data: nothing is created.
	bad := filepath.Join(t.TempDir(), "bad.jsonl")
	os.WriteFile(bad, []byte(sftData+`{"messages":"Paris"}`+"\n"), 0o644)
	code, _, errs := runCmd(trainCmd, append([]string{"sft", "--model", "local/p/m", "--base", "tiny", "--file", bad}, cli...)...)
	if code != 1 || !strings.Contains(errs, bad+":4:") || !strings.Contains(errs, `"messages" must be an array`) {
		t.Fatalf("bad line: exit %d, stderr %q", code, errs)
	}
	c, _, body := do(t, "GET", s.url+"/v1/preview/models", bearer, "")
	if list := jsonOf(t, c, body, 200)["data"].([]any); len(list) != 0 {
		t.Fatalf("a model was created for bad data: %v", list)
	}

	// First job creates the model on tiny; the second needs no --base.
	code, out, errs := runCmd(trainCmd, append([]string{"sft", "--model", "local/p/m", "--base", "tiny", "--file", file, "--lr", "0.01", "--epochs", "2"}, cli...)...)
	if code != 0 || !strings.Contains(out, "created model local/p/m on base model tiny") {
		t.Fatalf("first job: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCmd(trainCmd, append([]string{"sft", "--model", "local/p/m", "--file", file, "--epochs", "2", "--batch-size", "3"}, cli...)...)
	if code != 0 {
		t.Fatalf("existing model without --base: exit %d\n%s\n%s", code, out, errs)
	}
	if strings.Contains(out, "\r") || !strings.Contains(out, "step 2/2 ") {
		t.Errorf("progress off a terminal:\n%q", out)
	}
	if !strings.Contains(out, "SUCCEEDED after 2 gradient step(s): local/p/m is now at checkpoint step 2 (each job adds one)") ||
		!strings.Contains(out, `"local/p/m:step2"`) {
		t.Errorf("last line does not say what the step is:\n%s", out)
	}
	// /v1/models lists the trained model beside its base, for its entity only.
	c, _, body = do(t, "GET", s.url+"/v1/models", bearer, "")
	var ml struct {
		Data []struct{ ID, Root, Parent string }
	}
	json.Unmarshal(body, &ml)
	if c != 200 || len(ml.Data) != 2 || ml.Data[0].ID != "tiny" || ml.Data[1].ID != "local/p/m" || ml.Data[1].Parent != "tiny" || ml.Data[1].Root != "local/p/m:latest" {
		t.Errorf("/v1/models: %d %s", c, body)
	}
	_, kout, _ := runCmd(keysCmd, "create", "--data", dir, "--entity", "bob")
	bob := strings.TrimSpace(kout[strings.LastIndex(strings.TrimSpace(kout), "\n")+1:])
	c, _, body = do(t, "GET", s.url+"/v1/models", "Bearer "+bob, "")
	if c != 200 || strings.Contains(string(body), "local/p/m") {
		t.Errorf("/v1/models for another entity: %d %s", c, body)
	}
	code, _, errs = runCmd(trainCmd, append([]string{"sft", "--model", "local/p/m", "--base", "demo", "--file", file}, cli...)...)
	if code != 1 || !strings.Contains(errs, `exists on base model "tiny"`) {
		t.Errorf("another --base for an existing model: exit %d, %q", code, errs)
	}

	// RL: plain replies without logprobs need --allow-training-without-logprobs; a group whose
	// rewards are equal is skipped, and a step where every group is still succeeds.
	choices, _ := sampleChoices(t, s, bearer, `{"model":"local/p/m","messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"n":2,"seed":1}`)
	group := func(r1, r2 float64) string {
		return fmt.Sprintf(`{"trajectories":[{"messages_and_choices":[{"role":"user","content":"Hi"},%s],"reward":%g},{"messages_and_choices":[{"role":"user","content":"Hi"},%s],"reward":%g}]}`, choices[0], r1, choices[1], r2)
	}
	groups := filepath.Join(t.TempDir(), "g.json")
	os.WriteFile(groups, []byte("["+group(0, 1)+","+group(0.5, 0.5)+"]"), 0o644)
	// The server tokenises the trajectories when the job is created: a 400 naming the
	// choice, and no job.
	code, out, errs = runCmd(trainCmd, append([]string{"rl", "--model", "local/p/m", "--groups", groups}, cli...)...)
	if code != 1 || !strings.Contains(out+errs, "trajectory_groups[0].trajectories[0]: messages_and_choices[1]: the choice has no logprobs") {
		t.Errorf("RL without logprobs and without the flag: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, errs = runCmd(trainCmd, append([]string{"rl", "--model", "local/p/m", "--groups", groups, "--allow-training-without-logprobs"}, cli...)...)
	if code != 0 || !strings.Contains(out, "group 2 of 2: all 2 rewards are 0.5, nothing to learn from: skipped") {
		t.Errorf("RL with --allow-training-without-logprobs: exit %d\n%s\n%s", code, out, errs)
	}
	os.WriteFile(groups, []byte("["+group(1, 1)+"]"), 0o644)
	code, out, errs = runCmd(trainCmd, append([]string{"rl", "--model", "local/p/m", "--groups", groups, "--allow-training-without-logprobs"}, cli...)...)
	if code != 0 || !strings.Contains(out, "every group was skipped") || !strings.Contains(out, "no gradient step") || !strings.Contains(out, "SUCCEEDED") {
		t.Errorf("RL with equal rewards: exit %d\n%s\n%s", code, out, errs)
	}

	// Jobs: listed newest first; a finished job is left as it is by cancel.
	code, out, errs = runCmd(jobsCmd, append([]string{"list", "--model", "local/p/m"}, cli...)...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 5 || !strings.HasPrefix(lines[0], "ID") || !strings.Contains(lines[1], "rl") || !strings.Contains(lines[len(lines)-1], "sft") {
		t.Fatalf("jobs list: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = runCmd(jobsCmd, append([]string{"list", "--status", "failed"}, cli...)...)
	if code != 0 || strings.Count(out, "FAILED") != 0 || strings.Contains(out, "more") {
		t.Errorf("jobs list --status failed:\n%s", out)
	}
	code, out, _ = runCmd(jobsCmd, append([]string{"list", "--status", "SUCCEEDED", "--limit", "3"}, cli...)...)
	if code != 0 || strings.Count(out, "SUCCEEDED") != 3 || !strings.Contains(out, "(more: raise --limit)") {
		t.Errorf("jobs list --status SUCCEEDED --limit 3:\n%s", out)
	}
	first := strings.Fields(lines[len(lines)-1])[0]
	code, out, errs = runCmd(jobsCmd, append([]string{"cancel", first}, cli...)...)
	var j map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil || j["status"] != "SUCCEEDED" {
		t.Errorf("cancel of a finished job: exit %d\n%s\n%s", code, out, errs)
	}
}

// TestJobsCancelQueued: a job queued on a server without workers is cancelled by hone jobs
// cancel, and hone jobs watch then ends with exit 1.
func TestJobsCancelQueued(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--train-workers", "0")
	cli := []string{"--url", s.url, "--data", dir}
	file := filepath.Join(t.TempDir(), "d.jsonl")
	os.WriteFile(file, []byte(sftData), 0o644)
	code, out, errs := runCmd(trainCmd, append([]string{"sft", "--model", "local/p/q", "--file", file, "--no-watch"}, cli...)...)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out, errs)
	}
	id := strings.Fields(out[strings.Index(out, "job "):])[1]
	code, out, errs = runCmd(jobsCmd, append([]string{"cancel", id}, cli...)...)
	if code != 0 || !strings.Contains(out, `"status": "CANCELLED"`) {
		t.Fatalf("cancel: exit %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = runCmd(jobsCmd, append([]string{"watch", id}, cli...)...)
	if code != 1 || !strings.Contains(out, "CANCELLED") {
		t.Errorf("watch of a cancelled job: exit %d\n%s", code, out)
	}
	code, _, errs = runCmd(jobsCmd, append([]string{"list", "--status", "DONE"}, cli...)...)
	if code != 1 || !strings.Contains(errs, "status must be") {
		t.Errorf("bad status: exit %d %q", code, errs)
	}
}

// TestEventStreamEndsWithFinalEvent: a client following a job's events (text/event-stream)
// always gets its final event before [DONE], however the job's end falls between the
// server's reads (the stream once read the events, then the status, and could end without
// the final event of a job that ended in between). Many jobs that end at once, followed
// while they run.
func TestEventStreamEndsWithFinalEvent(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, "--train-workers", "2")
	bearer := "Bearer " + initialKey(t, dir)
	ctx := context.Background()
	c := client.New(s.url, initialKey(t, dir))
	m, err := c.CreateModel(ctx, trainapi.CreateModelRequest{Project: "p", Name: "m", BaseModel: "demo"})
	if err != nil {
		t.Fatal(err)
	}
	// Messages only (nothing sampled): each job ends at once.
	group := json.RawMessage(`{"trajectories":[{"messages_and_choices":[{"role":"user","content":"x"},{"role":"assistant","content":"a"}],"reward":1},{"messages_and_choices":[{"role":"user","content":"x"},{"role":"assistant","content":"b"}]}]}`)
	const n = 100
	errs := make(chan string, n)
	for range n {
		job, err := c.CreateRLJob(ctx, training.RLRequest{ModelID: m.ID, TrajectoryGroups: []json.RawMessage{group}})
		if err != nil {
			t.Fatal(err)
		}
		// The stream itself, as a client reads it: its final event, then [DONE].
		go func() {
			req, _ := http.NewRequest("GET", s.url+"/v1/preview/training-jobs/"+job+"/events", nil)
			req.Header.Set("Authorization", bearer)
			req.Header.Set("Accept", "text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			final := strings.Contains(string(b), "event: training_ended") || strings.Contains(string(b), "event: training_failed")
			if !final || !strings.HasSuffix(strings.TrimSpace(string(b)), "data: [DONE]") {
				errs <- fmt.Sprintf("job %s: stream without its final event:\n%s", job, b)
				return
			}
			errs <- ""
		}()
	}
	for range n {
		if e := <-errs; e != "" {
			t.Error(e)
		}
	}
}
