// Command rl-bench times one ART-shaped RL step against a served model through Hone's HTTP
// API, as an ART user runs it: rollouts through chat completions with logprobs (prompts ×
// samples of up to max-tokens tokens each, sent at once, as asyncio.gather sends them), one RL
// job on the training API with the fields ART's backend.train sends, the job followed to its
// end, then chat completions on the new checkpoint until one answers. It repeats the step
// (each round samples from the latest checkpoint and trains the next) and prints each round's
// phases and their median and spread:
//
//   - rollouts: the first request sent → the last reply read (client clock);
//   - submit: POST /v1/preview/training-jobs → its answer (the trajectories are tokenised and
//     checked then);
//   - queueing: the job's created_at → started_at;
//   - training: started_at → finished_at, split by the job's events into setup (→
//     training_started: checkpoint and optimizer loaded), step (→ gradient_step: tokenising,
//     forward, backward, optimizer) and save (→ finished_at: checkpoint written, registered
//     and published);
//   - publication: finished_at → the first chat completion on :step<N> that answers;
//   - total: the first rollout request → the checkpoint answering.
//
// Server times are the job's and its events' timestamps (microseconds); the client and the
// server it starts share one clock. ART's client polls events once a second; this follows
// them as server-sent events, so its total has no polling delay.
//
// Usage (from the repository root; builds and starts `hone serve` on the model unless -url
// is given):
//
//	go run ./scripts/rl-bench -model ~/.cache/hone/smollm2-135m-instruct -rounds 5
//	go run ./scripts/rl-bench -url http://127.0.0.1:8080 -key $KEY -base smol
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/honeai/hone/internal/client"
	"github.com/honeai/hone/internal/jobs"
)

// prompts are the rollouts' user messages: with SmolLM2's chat template (its default system
// prompt) and 8 sampled tokens, a trajectory is about 60 tokens.
var prompts = []string{
	"Write one short sentence about the sea, the wind and an old lighthouse keeper who lives alone.",
	"Name a city in Europe that is famous for its bridges, and say in a few words why people visit it.",
	"Give me a single word that rhymes with light, and then use it in a short and simple sentence.",
	"Describe the taste of a fresh green apple to someone who has never eaten one, in one sentence.",
	"Suggest a name for a small grey cat that likes to sleep on warm books next to the window.",
	"Tell me one interesting fact about the planet Mars that a ten year old child would enjoy.",
}

type bench struct {
	url, key, base string
	api            *client.Client // Hone's typed client, as the CLI uses it
	pid            int            // the server this started (0: none), whose CPU time is read
}

// cpu is the CPU time (user and system, all threads) the server has used, 0 when it was not
// started here (Linux: /proc/PID/stat, in clock ticks of 10 ms).
func (b *bench) cpu() time.Duration {
	if b.pid == 0 {
		return 0
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", b.pid))
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis: state is field 3, utime 14, stime 15.
	i := bytes.LastIndexByte(st, ')')
	f := strings.Fields(string(st[i+1:]))
	if len(f) < 13 {
		return 0
	}
	var ut, stt int64
	fmt.Sscan(f[11], &ut)
	fmt.Sscan(f[12], &stt)
	return time.Duration(ut+stt) * 10 * time.Millisecond
}

func main() {
	home, _ := os.UserHomeDir()
	modelPath := flag.String("model", filepath.Join(home, ".cache/hone/smollm2-135m-instruct"), "model directory or .gguf file to serve (without -url)")
	url := flag.String("url", "", "a running Hone server (default: build and start one)")
	key := flag.String("key", "", "API key of -url")
	base := flag.String("base", "bench", "the served base model's name (with -url)")
	bin := flag.String("hone", "", "hone binary to start (default: go build ./cmd/hone)")
	port := flag.Int("port", 18260, "port of the server this starts")
	rounds := flag.Int("rounds", 5, "RL steps to time (each on the previous step's checkpoint)")
	nPrompts := flag.Int("prompts", 6, "trajectory groups (prompts)")
	samples := flag.Int("samples", 8, "trajectories per group")
	maxTokens := flag.Int("max-tokens", 8, "max_tokens of each rollout")
	conc := flag.Int("concurrency", 0, "rollout requests in flight (0: all)")
	serveFlags := flag.String("serve-flags", "", "extra flags for hone serve (space-separated)")
	flag.Parse()
	if *nPrompts > len(prompts) {
		fatal(fmt.Errorf("at most %d prompts", len(prompts)))
	}
	printCPU()
	b := &bench{url: strings.TrimRight(*url, "/"), key: *key, base: *base}
	if b.url == "" {
		stop, err := b.start(*bin, *modelPath, *port, strings.Fields(*serveFlags))
		if err != nil {
			fatal(err)
		}
		defer stop()
	}
	b.api = client.New(b.url, b.key)
	if err := b.run(*rounds, *nPrompts, *samples, *maxTokens, *conc); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "rl-bench:", err)
	os.Exit(1)
}

// printCPU prints the CPU's model, its flags that matter to the kernels, the cores and the
// load (the machine may be shared).
func printCPU() {
	name, flags := "unknown", ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			switch strings.TrimSpace(k) {
			case "model name":
				name = strings.TrimSpace(v)
			case "flags":
				flags = v
			}
		}
	}
	var have []string
	for _, f := range []string{"avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_tile"} {
		if slices.Contains(strings.Fields(flags), f) {
			have = append(have, f)
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("CPU: %s, %d logical CPUs (%s); load average %s", name, runtime.NumCPU(), strings.Join(have, " "), load)
}

// start builds hone (unless bin is given) and serves the model as b.base on a fresh data
// directory; stop ends the server and removes the directory.
func (b *bench) start(bin, modelPath string, port int, extra []string) (stop func(), err error) {
	dir, err := os.MkdirTemp("", "hone-rl-bench-")
	if err != nil {
		return nil, err
	}
	if bin == "" {
		bin = filepath.Join(dir, "hone")
		build := exec.Command("go", "build", "-o", bin, "./cmd/hone")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("go build ./cmd/hone (run from the repository root): %w", err)
		}
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	args := append([]string{"serve", "--data", filepath.Join(dir, "data"), "--addr", addr, "--no-demo-model",
		"--model", b.base + "=" + modelPath, "--log-level", "warn"}, extra...)
	cmd := exec.Command(bin, args...)
	out, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stop = func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		out.Close()
		os.RemoveAll(dir)
	}
	b.url, b.pid = "http://"+addr, cmd.Process.Pid
	t0 := time.Now()
	for time.Since(t0) < 3*time.Minute {
		log, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
		if bytes.Contains(log, []byte("listening")) {
			k, err := os.ReadFile(filepath.Join(dir, "data", "initial-api-key"))
			if err != nil {
				stop()
				return nil, err
			}
			b.key = strings.TrimSpace(string(k))
			fmt.Printf("server: %s serve --model %s=%s %s (started in %.1f s)\n", bin, b.base, modelPath, strings.Join(extra, " "), time.Since(t0).Seconds())
			return stop, nil
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "serve.log"))
	stop()
	return nil, fmt.Errorf("the server did not start:\n%s", log)
}

// call sends a JSON request and decodes the answer into out (when not nil).
func (b *bench) call(ctx context.Context, method, path string, body, out any) error {
	if err := b.api.JSON(ctx, method, path, body, out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// completion is the part of a chat completion the bench reads; the choice is kept as sent,
// as ART keeps the OpenAI SDK's Choice.
type completion struct {
	Choices []json.RawMessage `json:"choices"`
	Usage   struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
}

type trajectory struct {
	MessagesAndChoices []json.RawMessage `json:"messages_and_choices"`
	Reward             float64           `json:"reward"`
}

type group struct {
	Trajectories []trajectory `json:"trajectories"`
}

// round is one timed RL step.
type round struct {
	rollouts, submit, queueing, setup, step, save, training, publication, total time.Duration
	// The server's CPU time (all threads) during the rollouts, from the job's submission to
	// its end, and from there to the checkpoint answering: on a machine shared with other
	// work it moves less than the wall-clock phases do.
	cpuRollouts, cpuJob, cpuPublication time.Duration
	// again is the publication's request sent again once the checkpoint answered.
	again                                           time.Duration
	tokens, prompt, cached, trainable, trajectories int
	serverTokensPerSecond                           float64
}

func (b *bench) run(rounds, nPrompts, samples, maxTokens, conc int) error {
	ctx := context.Background()
	var m struct {
		ID      string `json:"id"`
		Entity  string `json:"entity"`
		Project string `json:"project"`
		Name    string `json:"name"`
	}
	name := fmt.Sprintf("agent-%d", time.Now().UnixNano())
	if err := b.call(ctx, "POST", "/v1/preview/models", map[string]any{"project": "rl-bench", "name": name, "base_model": b.base}, &m); err != nil {
		return err
	}
	inference := fmt.Sprintf("wandb-artifact:///%s/%s/%s", m.Entity, m.Project, m.Name)
	fmt.Printf("model %s/%s/%s on %s: %d prompts × %d samples of up to %d tokens, %d rounds\n", m.Entity, m.Project, m.Name, b.base, nPrompts, samples, maxTokens, rounds)
	fmt.Printf("%5s %9s %8s %9s %8s %8s %8s %9s %12s %8s %7s %8s %10s | %13s %8s %12s\n", "round", "rollouts", "submit", "queueing", "setup", "step", "save", "training", "publication", "total", "tok/traj", "trained", "tok/s(srv)",
		"cpu:rollouts", "cpu:job", "cpu:publish")
	var all []round
	for r := 1; r <= rounds; r++ {
		rd, err := b.round(ctx, r, m.ID, inference, nPrompts, samples, maxTokens, conc)
		if err != nil {
			return fmt.Errorf("round %d: %w", r, err)
		}
		all = append(all, rd)
		fmt.Printf("%5d %9s %8s %9s %8s %8s %8s %9s %12s %8s %7.1f %8d %10.0f | %13s %8s %12s\n", r, sec(rd.rollouts), sec(rd.submit), sec(rd.queueing), sec(rd.setup), sec(rd.step), sec(rd.save),
			sec(rd.training), sec(rd.publication), sec(rd.total), float64(rd.tokens)/float64(rd.trajectories), rd.trainable, rd.serverTokensPerSecond,
			sec(rd.cpuRollouts), sec(rd.cpuJob), sec(rd.cpuPublication))
	}
	fmt.Printf("median (min–max) over %d rounds:\n", len(all))
	for _, f := range []struct {
		name string
		get  func(round) time.Duration
	}{{"rollouts", func(r round) time.Duration { return r.rollouts }}, {"submit", func(r round) time.Duration { return r.submit }},
		{"queueing", func(r round) time.Duration { return r.queueing }}, {"training", func(r round) time.Duration { return r.training }},
		{"  setup", func(r round) time.Duration { return r.setup }}, {"  step", func(r round) time.Duration { return r.step }},
		{"  save", func(r round) time.Duration { return r.save }}, {"publication", func(r round) time.Duration { return r.publication }},
		{"total", func(r round) time.Duration { return r.total }},
		{"  the same request again", func(r round) time.Duration { return r.again }},
		{"server CPU, rollouts", func(r round) time.Duration { return r.cpuRollouts }},
		{"server CPU, job", func(r round) time.Duration { return r.cpuJob }},
		{"server CPU, publication", func(r round) time.Duration { return r.cpuPublication }}} {
		var v []time.Duration
		for _, r := range all {
			v = append(v, f.get(r))
		}
		slices.Sort(v)
		if v[len(v)-1] == 0 {
			continue // no server CPU times (-url)
		}
		fmt.Printf("  %-24s %7s s (%s–%s)\n", f.name, sec(v[len(v)/2]), sec(v[0]), sec(v[len(v)-1]))
	}
	tok, n, prompt, cached := 0, 0, 0, 0
	for _, r := range all {
		tok, n, prompt, cached = tok+r.tokens, n+r.trajectories, prompt+r.prompt, cached+r.cached
	}
	fmt.Printf("  tokens per trajectory (prompt + completion): %.1f; rollouts' prompt tokens from the prefix cache: %.0f%%\n",
		float64(tok)/float64(n), 100*float64(cached)/float64(prompt))
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("load average at the end: %s", load)
	return nil
}

func sec(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

func (b *bench) round(ctx context.Context, r int, modelID, inference string, nPrompts, samples, maxTokens, conc int) (round, error) {
	var rd round
	if conc <= 0 {
		conc = nPrompts * samples
	}
	groups := make([]group, nPrompts)
	for g := range groups {
		groups[g].Trajectories = make([]trajectory, samples)
	}
	c0, t0 := b.cpu(), time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, conc)
	for g := range nPrompts {
		for i := range samples {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				user, _ := json.Marshal(map[string]string{"role": "user", "content": prompts[g]})
				var c completion
				err := b.call(ctx, "POST", "/v1/chat/completions", map[string]any{"model": inference,
					"messages": []json.RawMessage{user}, "max_tokens": maxTokens, "temperature": 1.0, "logprobs": true,
					"seed": r*10000 + g*100 + i}, &c)
				mu.Lock()
				defer mu.Unlock()
				if err == nil && len(c.Choices) != 1 {
					err = fmt.Errorf("%d choices", len(c.Choices))
				}
				if err != nil {
					firstErr = firstOf(firstErr, err)
					return
				}
				var ch struct {
					Message struct {
						Content string `json:"content"`
					} `json:"message"`
				}
				json.Unmarshal(c.Choices[0], &ch)
				// A score of the reply that differs within a group: its length, ties broken
				// by the sample's index, so that every trajectory has an advantage.
				groups[g].Trajectories[i] = trajectory{MessagesAndChoices: []json.RawMessage{user, c.Choices[0]},
					Reward: float64(len(ch.Message.Content)) + float64(i)/100}
				rd.tokens += c.Usage.PromptTokens + c.Usage.CompletionTokens
				rd.prompt += c.Usage.PromptTokens
				rd.cached += c.Usage.PromptTokensDetails.CachedTokens
				rd.trajectories++
			}()
		}
	}
	wg.Wait()
	rd.rollouts = time.Since(t0)
	c1 := b.cpu()
	rd.cpuRollouts = c1 - c0
	if firstErr != nil {
		return rd, firstErr
	}
	// What ART 0.5.18's backend.train sends with its defaults.
	cfg := map[string]any{"advantage_balance": 0.0, "epsilon": nil, "epsilon_high": nil, "importance_sampling_level": "token",
		"kimi_k2_tau": nil, "learning_rate": 5e-6, "mask_prob_ratio": false, "max_negative_advantage_importance_sampling_weight": nil,
		"ppo": false, "precalculate_logprobs": false, "scale_rewards": true}
	s0 := time.Now()
	var j jobs.Job
	if err := b.call(ctx, "POST", "/v1/preview/training-jobs", map[string]any{"model_id": modelID, "trajectory_groups": groups, "experimental_config": cfg}, &j); err != nil {
		return rd, err
	}
	rd.submit = time.Since(s0)
	evs, err := b.follow(ctx, j.ID)
	if err != nil {
		return rd, err
	}
	c2 := b.cpu()
	rd.cpuJob = c2 - c1
	if err := b.call(ctx, "GET", "/v1/preview/training-jobs/"+j.ID, nil, &j); err != nil {
		return rd, err
	}
	if j.Status != "SUCCEEDED" || j.Step == nil || j.StartedAt == nil || j.FinishedAt == nil {
		msg := ""
		if j.ErrorMessage != nil {
			msg = *j.ErrorMessage
		}
		return rd, fmt.Errorf("job %s: %s %s", j.ID, j.Status, msg)
	}
	// The checkpoint, asked for until it answers (a salt of its own: no prompt cached).
	ckpt := fmt.Sprintf("%s:step%d", inference, *j.Step)
	hi := func(salt string) error {
		return b.call(ctx, "POST", "/v1/chat/completions", map[string]any{"model": ckpt, "cache_salt": salt,
			"messages": []map[string]string{{"role": "user", "content": "Hi"}}, "max_tokens": 1}, nil)
	}
	for {
		err := hi(fmt.Sprintf("publication-%d", r))
		if err == nil {
			break
		}
		if client.StatusOf(err) == 0 || time.Since(s0) > 5*time.Minute {
			return rd, err
		}
		time.Sleep(5 * time.Millisecond)
	}
	servable := time.Now()
	rd.cpuPublication = b.cpu() - c2
	// The same request again, the checkpoint loaded: what answering costs by itself.
	if err := hi(fmt.Sprintf("again-%d", r)); err != nil {
		return rd, err
	}
	rd.again = time.Since(servable)
	rd.total = servable.Sub(t0)
	created, started, finished := parse(j.CreatedAt), parse(*j.StartedAt), parse(*j.FinishedAt)
	rd.queueing, rd.training, rd.publication = started.Sub(created), finished.Sub(started), servable.Sub(finished)
	var tStarted, tStep time.Time
	for _, e := range evs {
		switch e.Type {
		case "training_started":
			tStarted = parse(e.CreatedAt)
		case "gradient_step":
			tStep = parse(e.CreatedAt)
			var d struct {
				Trajectories int     `json:"num_trajectories"`
				Trainable    int     `json:"num_trainable_tokens"`
				TokensPerSec float64 `json:"tokens_per_second"`
			}
			json.Unmarshal(e.Data, &d)
			rd.trainable, rd.serverTokensPerSecond = d.Trajectories, d.TokensPerSec
		}
	}
	if !tStarted.IsZero() && !tStep.IsZero() {
		rd.setup, rd.step, rd.save = tStarted.Sub(started), tStep.Sub(tStarted), finished.Sub(tStep)
	}
	return rd, nil
}

func firstOf(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func parse(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		fatal(fmt.Errorf("time %q: %w", s, err))
	}
	return t
}

// follow reads the job's events until the stream ends (the job checked afterwards).
func (b *bench) follow(ctx context.Context, id string) ([]jobs.Event, error) {
	st, err := b.api.FollowJobEvents(ctx, id)
	if err != nil {
		return nil, err
	}
	defer st.Close()
	var evs []jobs.Event
	for st.Next() {
		e := st.Event()
		evs = append(evs, e)
		if e.Type == "training_failed" {
			return nil, fmt.Errorf("job %s failed: %s", id, e.Data)
		}
	}
	return evs, st.Err()
}
