package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"
)

func init() {
	register("train", "run training against a Hone server: `hone train sft` (JSONL chat data) or `hone train rl` (ART trajectory groups)", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runTrain(ctx, args, os.Stdout, os.Stderr)
	})
	register("jobs", "follow training jobs: `hone jobs watch JOB_ID` (progress bar and live metrics), `hone jobs get JOB_ID`", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runJobs(ctx, args, os.Stdout, os.Stderr)
	})
}

// client talks to a Hone server's training API.
type client struct {
	url, key string
	http     *http.Client
}

func clientFlags(fs *flag.FlagSet) (*string, *string, *string) {
	url := fs.String("url", envOr("HONE_URL", "http://127.0.0.1:8080"), "Hone server (env HONE_URL)")
	key := fs.String("key", os.Getenv("HONE_API_KEY"), "API key (env HONE_API_KEY; default: DATA/initial-api-key)")
	data := fs.String("data", "./hone-data", "data directory whose initial-api-key to use when no key is given")
	return url, key, data
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func newClient(url, key, data string) (*client, error) {
	if key == "" {
		b, err := os.ReadFile(filepath.Join(data, InitialKeyFile))
		if err != nil {
			return nil, errors.New("no API key: pass --key, set HONE_API_KEY, or point --data at the server's data directory")
		}
		key = strings.TrimSpace(string(b))
	}
	return &client{url: strings.TrimRight(url, "/"), key: key, http: &http.Client{}}, nil
}

func (c *client) do(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, c.url+path, body)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		var env struct {
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		if json.Unmarshal(b, &env) == nil && env.Error.Message != "" {
			return fmt.Errorf("%s %s: %d: %s", method, path, resp.StatusCode, env.Error.Message)
		}
		return fmt.Errorf("%s %s: %d: %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

func (c *client) postJSON(ctx context.Context, path string, in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return c.do(ctx, "POST", path, bytes.NewReader(b), "application/json", out)
}

// ensureModel creates (or finds) <entity>/<project>/<name> on base and returns its id.
func (c *client) ensureModel(ctx context.Context, ref, base string) (string, error) {
	parts := strings.Split(ref, "/")
	if len(parts) != 3 {
		return "", fmt.Errorf("--model %q: use <entity>/<project>/<name>", ref)
	}
	var m struct {
		ID string `json:"id"`
	}
	err := c.postJSON(ctx, "/v1/preview/models", map[string]any{"entity": parts[0], "project": parts[1], "name": parts[2],
		"base_model": base, "return_existing": true}, &m)
	return m.ID, err
}

const trainUsage = `usage:
  hone train sft --model ENTITY/PROJECT/NAME --file FILE.jsonl [--base demo] [--lr 1e-4] [--epochs 1]
                 [--batch-size N] [--assistant-turns all|last] [--no-watch] [--url --key]
  hone train rl  --model ENTITY/PROJECT/NAME --groups FILE.json [--base demo] [--lr 1e-5]
                 [--loss cispo|ppo] [--no-watch] [--url --key --data]

The model is created on the base model if it does not exist. FILE.jsonl holds one
{"messages": [...]} per line; FILE.json a JSON array of ART trajectory groups. The job's
progress is followed until it ends (see hone jobs watch).
`

func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "sft" && args[0] != "rl") {
		fmt.Fprint(stderr, trainUsage)
		return 2
	}
	kind := args[0]
	fs := flag.NewFlagSet("train "+kind, flag.ContinueOnError)
	fs.SetOutput(stderr)
	url, key, data := clientFlags(fs)
	modelRef := fs.String("model", "", "ENTITY/PROJECT/NAME of the trained model")
	base := fs.String("base", "demo", "base model (for a new model)")
	dataFile := fs.String("file", "", "SFT: JSONL chat data file")
	groupsFile := fs.String("groups", "", "RL: JSON file with an array of trajectory groups")
	lr := fs.Float64("lr", 0, "learning rate (default: the server's: SFT 5e-5, RL 5e-6)")
	epochs := fs.Int("epochs", 0, "SFT: passes over the data")
	batch := fs.Int("batch-size", 0, "SFT: examples per step (default auto)")
	turns := fs.String("assistant-turns", "all", "SFT: all or last")
	loss := fs.String("loss", "", "RL: cispo or ppo")
	noWatch := fs.Bool("no-watch", false, "print the job id and return without following it")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	c, err := newClient(*url, *key, *data)
	if err != nil {
		fmt.Fprintln(stderr, "hone train:", err)
		return 1
	}
	id, err := c.ensureModel(ctx, *modelRef, *base)
	if err != nil {
		fmt.Fprintln(stderr, "hone train:", err)
		return 1
	}
	var job struct {
		ID string `json:"id"`
	}
	switch kind {
	case "sft":
		if *dataFile == "" {
			fmt.Fprintln(stderr, "hone train sft: --file FILE.jsonl is required")
			return 2
		}
		f, err := os.Open(*dataFile)
		if err != nil {
			fmt.Fprintln(stderr, "hone train sft:", err)
			return 1
		}
		var up struct {
			URL string `json:"url"`
		}
		err = c.do(ctx, "POST", "/v1/preview/files", f, "application/jsonl", &up)
		f.Close()
		if err != nil {
			fmt.Fprintln(stderr, "hone train sft:", err)
			return 1
		}
		cfg := map[string]any{"assistant_turns": *turns}
		if *lr > 0 {
			cfg["learning_rate"] = *lr
		}
		if *epochs > 0 {
			cfg["epochs"] = *epochs
		}
		if *batch > 0 {
			cfg["batch_size"] = *batch
		}
		err = c.postJSON(ctx, "/v1/preview/sft-training-jobs", map[string]any{"model_id": id, "training_data_url": up.URL, "config": cfg}, &job)
		if err != nil {
			fmt.Fprintln(stderr, "hone train sft:", err)
			return 1
		}
	case "rl":
		if *groupsFile == "" {
			fmt.Fprintln(stderr, "hone train rl: --groups FILE.json is required")
			return 2
		}
		raw, err := os.ReadFile(*groupsFile)
		if err != nil {
			fmt.Fprintln(stderr, "hone train rl:", err)
			return 1
		}
		var groups []json.RawMessage
		if err := json.Unmarshal(raw, &groups); err != nil {
			fmt.Fprintln(stderr, "hone train rl: --groups must hold a JSON array of trajectory groups:", err)
			return 1
		}
		xc := map[string]any{}
		if *lr > 0 {
			xc["learning_rate"] = *lr
		}
		if *loss != "" {
			xc["loss_fn"] = *loss
		}
		if err := c.postJSON(ctx, "/v1/preview/training-jobs", map[string]any{"model_id": id, "trajectory_groups": groups, "experimental_config": xc}, &job); err != nil {
			fmt.Fprintln(stderr, "hone train rl:", err)
			return 1
		}
	}
	fmt.Fprintf(stdout, "job %s queued for model %s (%s)\n", job.ID, *modelRef, id)
	if *noWatch {
		return 0
	}
	return watchJob(ctx, c, job.ID, stdout, stderr)
}

func runJobs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) < 1 || (args[0] != "watch" && args[0] != "get") {
		fmt.Fprintln(stderr, "usage: hone jobs watch|get JOB_ID [--url --key --data]")
		return 2
	}
	fs := flag.NewFlagSet("jobs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	url, key, data := clientFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "hone jobs: give one JOB_ID")
		return 2
	}
	c, err := newClient(*url, *key, *data)
	if err != nil {
		fmt.Fprintln(stderr, "hone jobs:", err)
		return 1
	}
	if args[0] == "get" {
		var j map[string]any
		if err := c.do(ctx, "GET", "/v1/preview/training-jobs/"+fs.Arg(0), nil, "", &j); err != nil {
			fmt.Fprintln(stderr, "hone jobs:", err)
			return 1
		}
		b, _ := json.MarshalIndent(j, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return 0
	}
	return watchJob(ctx, c, fs.Arg(0), stdout, stderr)
}

// watchJob follows a job's events (server-sent events) with a progress bar and the latest
// metrics, and returns 0 when it succeeded.
func watchJob(ctx context.Context, c *client, id string, stdout, stderr io.Writer) int {
	req, err := http.NewRequestWithContext(ctx, "GET", c.url+"/v1/preview/training-jobs/"+id+"/events", nil)
	if err != nil {
		fmt.Fprintln(stderr, "hone jobs:", err)
		return 1
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.http.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, "hone jobs:", err)
		return 1
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		fmt.Fprintf(stderr, "hone jobs: %d: %s\n", resp.StatusCode, b)
		return 1
	}
	total, done := 0, 0
	start := time.Now()
	failed := ""
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: {") {
			continue
		}
		var ev struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if json.Unmarshal([]byte(line[len("data: "):]), &ev) != nil {
			continue
		}
		switch ev.Type {
		case "training_started":
			if n, ok := ev.Data["num_sequences"].(float64); ok {
				total = int(n)
			}
			fmt.Fprintf(stdout, "training started: %d step(s)\n", total)
		case "gradient_step":
			done++
			fmt.Fprintf(stdout, "\r%s %s", bar(done, total, 30), metricLine(ev.Data, time.Since(start)))
		case "training_ended":
			fmt.Fprintf(stdout, "\ntraining ended after %s\n", time.Since(start).Round(time.Millisecond))
		case "training_failed":
			failed, _ = ev.Data["error_message"].(string)
			fmt.Fprintf(stdout, "\ntraining failed: %s\n", failed)
		}
	}
	var j struct {
		Status string `json:"status"`
		Step   *int   `json:"step"`
	}
	if err := c.do(ctx, "GET", "/v1/preview/training-jobs/"+id, nil, "", &j); err != nil {
		fmt.Fprintln(stderr, "hone jobs:", err)
		return 1
	}
	if j.Step != nil {
		fmt.Fprintf(stdout, "job %s %s: checkpoint step %d\n", id, j.Status, *j.Step)
	} else {
		fmt.Fprintf(stdout, "job %s %s\n", id, j.Status)
	}
	if j.Status != "SUCCEEDED" {
		return 1
	}
	return 0
}

func bar(done, total, width int) string {
	if total <= 0 {
		return fmt.Sprintf("[%d]", done)
	}
	fill := min(width, done*width/total)
	return fmt.Sprintf("[%s%s] %d/%d", strings.Repeat("#", fill), strings.Repeat(".", width-fill), done, total)
}

func metricLine(m map[string]any, elapsed time.Duration) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := map[string]bool{"loss": true, "reward": true, "grad_norm": true, "learning_rate": true, "tokens_per_second": true, "entropy": true}
	var parts []string
	for _, k := range keys {
		if v, ok := m[k].(float64); ok && want[k] {
			parts = append(parts, fmt.Sprintf("%s %.4g", k, v))
		}
	}
	return strings.Join(parts, "  ") + fmt.Sprintf("  (%s)", elapsed.Round(time.Second))
}
