package main

import (
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
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/honeai/hone/internal/client"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/train"
	"github.com/honeai/hone/internal/trainapi"
	"github.com/honeai/hone/internal/training"
	"github.com/honeai/hone/internal/trainingdata"
)

func init() {
	register("train", "train on a Hone server: sft (JSONL chat data) or rl (ART trajectory groups)", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runTrain(ctx, args, os.Stdout, os.Stderr)
	})
	register("jobs", "training jobs: list, watch (progress and live metrics), get, cancel", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runJobs(ctx, args, os.Stdout, os.Stderr)
	})
}

// clientOpts are the flags of every command that talks to a server.
type clientOpts struct{ url, key, data string }

func clientFlags(fs *flag.FlagSet) *clientOpts {
	o := &clientOpts{}
	fs.StringVar(&o.url, "url", envOr("HONE_URL", "http://127.0.0.1:8080"), "Hone server (env HONE_URL)")
	fs.StringVar(&o.key, "key", os.Getenv("HONE_API_KEY"), "API key (env HONE_API_KEY; default: the server's DATA/initial-api-key)")
	fs.StringVar(&o.data, "data", "./hone-data", "data directory whose initial-api-key to use when no key is given")
	return o
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// newClient is a client of the server the flags name, with their key (or the data
// directory's initial key); a server that does not answer is explained (noServer).
func newClient(o *clientOpts) (*client.Client, error) {
	key := o.key
	if key == "" {
		b, err := os.ReadFile(filepath.Join(o.data, InitialKeyFile))
		if err != nil {
			return nil, errors.New("no API key: pass --key, set HONE_API_KEY, or point --data at the server's data directory")
		}
		key = strings.TrimSpace(string(b))
	}
	c := client.New(o.url, key)
	c.Unreachable = noServer
	return c, nil
}

// refOf is a trainable model's reference, <entity>/<project>/<name>.
func refOf(m registry.Model) string { return m.Entity + "/" + m.Project + "/" + m.Name }

// ensureModel finds <entity>/<project>/<name>, or creates it on base (demo when base is "").
// An existing model needs no base; a base that differs from its own is an error.
func ensureModel(ctx context.Context, c *client.Client, ref, base string) (registry.Model, bool, error) {
	parts := strings.Split(ref, "/")
	if len(parts) != 3 || slices.Contains(parts, "") {
		return registry.Model{}, false, fmt.Errorf("--model %q: use ENTITY/PROJECT/NAME, e.g. local/demo/agent", ref)
	}
	m, err := c.Model(ctx, ref)
	switch {
	case err == nil:
		if base != "" && base != m.BaseModel {
			return m, false, fmt.Errorf("model %s exists on base model %q; --base %q differs (leave --base out, or name a new model)", ref, m.BaseModel, base)
		}
		return m, false, nil
	case client.StatusOf(err) == http.StatusNotFound:
	default:
		return m, false, err
	}
	if base == "" {
		base = "demo"
	}
	m, err = c.CreateModel(ctx, trainapi.CreateModelRequest{Entity: parts[0], Project: parts[1], Name: parts[2], BaseModel: base, ReturnExisting: true})
	if err != nil {
		return m, false, fmt.Errorf("creating model %s on base model %q: %w", ref, base, err)
	}
	return m, true, nil
}

// checkBase checks, before anything is created, the base model a job on ref trains: the
// model's own when it exists, else base (demo when ""): the server must serve it, with a chat
// template (training renders the data with it).
func checkBase(ctx context.Context, c *client.Client, ref, base string) error {
	m, err := c.Model(ctx, ref)
	switch st := client.StatusOf(err); {
	case err == nil:
		base = m.BaseModel
	case st == http.StatusNotFound || st == http.StatusBadRequest:
		// A new model (a malformed name is ensureModel's to report).
	default:
		return err
	}
	if base == "" {
		base = "demo"
	}
	list, err := c.BaseModels(ctx)
	if err != nil {
		return err
	}
	var names []string
	for _, b := range list {
		if b.ID != base {
			names = append(names, b.ID)
			continue
		}
		if b.ChatTemplateFrom == "" {
			return fmt.Errorf("base model %s has no chat template, which training renders the data with: start the server with --chat-template %s=FILE", base, base)
		}
		return nil
	}
	return fmt.Errorf("base model %q is not served by %s (it serves %s): pass --base with one of them", base, c.URL, strings.Join(names, ", "))
}

var sftUsage = fmt.Sprintf(`usage: hone train sft --model ENTITY/PROJECT/NAME --file FILE.jsonl | --data-url URL [flags]

Supervised fine-tuning of a LoRA adapter. FILE.jsonl holds one {"messages": [...]} per line;
every line is checked before anything is sent. The model is created on --base when it does not
exist (an existing model keeps its base). The job runs on the server; its progress is followed
until it ends (see hone jobs watch). Its defaults (learning rate %g, %d epochs, batch size
"auto": examples/8, from 1 to 8) teach a LoRA adapter of the default rank a fact from about
8 examples of it in a few seconds on a 135M model; the API's own defaults, for clients that
send none, are ART's (learning rate %g, %d epoch).
`, sftCLILearningRate, sftCLIEpochs, train.DefaultSFTLearningRate, train.DefaultSFTEpochs)

// hone train sft's defaults, sent with every job: measured on SmolLM2-135M-Instruct
// (TestSFTTeachesAFact), where ART's 5e-5 and one epoch teach nothing from a few examples.
const (
	sftCLILearningRate = 1e-4
	sftCLIEpochs       = 3
)

var rlUsage = fmt.Sprintf(`usage: hone train rl --model ENTITY/PROJECT/NAME --groups FILE.json | --data-url URL [flags]

One RL step (a new checkpoint) on ART trajectory groups: FILE.json is a JSON array of groups,
each {"trajectories": [{"messages_and_choices": [...], "reward": R}, ...]}. A group whose
rewards are all equal teaches nothing and is skipped; when every group is, the step still
advances with the adapter unchanged, as ART's backends do. The model is created on --base
when it does not exist. Default learning rate: the server's, %g.
`, train.DefaultRLLearningRate)

const trainUsage = `usage:
  hone train sft --model ENTITY/PROJECT/NAME --file FILE.jsonl [flags]   supervised fine-tuning
  hone train rl  --model ENTITY/PROJECT/NAME --groups FILE.json [flags]  one RL step

Run 'hone train sft --help' or 'hone train rl --help' for the flags of each.
`

func runTrain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, trainUsage)
		return 2
	}
	kind := args[0]
	switch kind {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, trainUsage)
		return 0
	case "sft", "rl":
	default:
		fmt.Fprintf(stderr, "hone train: unknown kind %q: use sft or rl\nRun 'hone train --help'.\n", kind)
		return 2
	}
	name := "train " + kind
	fs := newFlagSet(name)
	co := clientFlags(fs)
	modelRef := fs.String("model", "", "ENTITY/PROJECT/NAME of the trained model (required)")
	base := fs.String("base", "", "base model of a new model (default demo); an existing model keeps its own")
	noWatch := fs.Bool("no-watch", false, "print the job id and return without following it")
	tokens := fs.String("trainable-tokens", "auto", "train rows of the embedding and LM head for the tokens that mark the assistant's turn: auto (when the base model does not end its turns), on or off")
	var (
		dataFile, turns, groupsFile, loss *string
		dataURL, schedule                 *string
		warmup                            *int
		lr                                *float64
		epochs, batch                     *int
		allowNoLogprobs                   *bool
	)
	header := sftUsage
	if kind == "sft" {
		dataFile = fs.String("file", "", "JSONL chat data file (this or --data-url)")
		dataURL = fs.String("data-url", "", "training data already on the server instead of --file: a weave:/// Dataset or table ref (hone datasets from-calls prints one), hone-file:///<id>, or a path under the server's --train-data-root")
		lr = fs.Float64("lr", sftCLILearningRate, "learning rate")
		epochs = fs.Int("epochs", sftCLIEpochs, "passes over the data")
		batch = fs.Int("batch-size", 0, "examples per gradient step (default: auto, examples/8 from 1 to 8)")
		turns = fs.String("assistant-turns", "all", "assistant turns trained on: all or last")
		schedule = fs.String("schedule", "", "learning-rate schedule: constant, linear or cosine (default: the server's, constant)")
		warmup = fs.Int("warmup", 0, "warm-up steps of the schedule")
	} else {
		header = rlUsage
		groupsFile = fs.String("groups", "", "JSON file with an array of trajectory groups (this or --data-url)")
		dataURL = fs.String("data-url", "", "trajectory groups already on the server instead of --groups: a weave:/// Dataset or table whose rows are groups (hone datasets from-calls --kind rl prints one)")
		lr = fs.Float64("lr", train.DefaultRLLearningRate, "learning rate")
		loss = fs.String("loss", "cispo", "loss: cispo or ppo")
		allowNoLogprobs = fs.Bool("allow-training-without-logprobs", false, "train on choices that carry no logprobs (their text is tokenised again)")
	}
	if code, ok := flagsOnly(name, header, fs, fs.Parse(args[1:]), stdout, stderr); !ok {
		return code
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *modelRef == "" {
		fmt.Fprintf(stderr, "hone %s: --model ENTITY/PROJECT/NAME is required\n", name)
		return 2
	}
	fail := failer(name, stderr)

	// Check the data before anything is created on the server.
	var data []byte
	var groups []json.RawMessage
	var notes []string // said after the job's id
	switch kind {
	case "sft":
		if (*dataFile == "") == (*dataURL == "") {
			fmt.Fprintln(stderr, "hone train sft: give --file FILE.jsonl or --data-url URL (one of them)")
			return 2
		}
		if *dataURL != "" {
			notes = append(notes, "training data "+*dataURL)
			break
		}
		var n int
		var err error
		if data, n, err = readSFTFile(*dataFile); err != nil {
			return fail(err)
		}
		notes = append(notes, fmt.Sprintf("%d examples from %s", n, *dataFile))
	case "rl":
		if (*groupsFile == "") == (*dataURL == "") {
			fmt.Fprintln(stderr, "hone train rl: give --groups FILE.json or --data-url URL (one of them)")
			return 2
		}
		if *dataURL != "" {
			notes = append(notes, "trajectory groups "+*dataURL)
			break
		}
		var err error
		if groups, notes, err = readGroupsFile(*groupsFile); err != nil {
			return fail(err)
		}
	}

	c, err := newClient(co)
	if err != nil {
		return fail(err)
	}
	if err := checkBase(ctx, c, *modelRef, *base); err != nil {
		return fail(fmt.Errorf("%w (nothing was created)", err))
	}
	m, created, err := ensureModel(ctx, c, *modelRef, *base)
	if err != nil {
		return fail(err)
	}
	// A job the server refuses leaves no model behind that this command created.
	failJob := func(err error) int {
		if created {
			if derr := c.DeleteModel(ctx, refOf(m)); derr == nil {
				err = fmt.Errorf("%w (the model %s this command created was deleted again)", err, refOf(m))
			}
		}
		return fail(err)
	}
	var jobID string
	switch kind {
	case "sft":
		trainURL := *dataURL
		if trainURL == "" {
			up, err := c.UploadFile(ctx, data, "application/jsonl")
			if err != nil {
				return failJob(err)
			}
			trainURL = up.URL
		}
		cfg := map[string]any{"assistant_turns": *turns, "learning_rate": *lr, "epochs": *epochs}
		if set["trainable-tokens"] {
			cfg["trainable_tokens"] = *tokens
		}
		if *batch > 0 {
			cfg["batch_size"] = *batch
		}
		req := training.SFTRequest{ModelID: m.ID, TrainingDataURL: trainURL, Config: mustJSON(cfg)}
		xc := map[string]any{}
		if *schedule != "" {
			xc["schedule"] = *schedule
		}
		if *warmup > 0 {
			xc["warmup_steps"] = *warmup
		}
		if len(xc) > 0 {
			req.ExperimentalConfig = mustJSON(xc)
		}
		if jobID, err = c.CreateSFTJob(ctx, req); err != nil {
			return failJob(err)
		}
	case "rl":
		xc := map[string]any{}
		if set["lr"] {
			xc["learning_rate"] = *lr
		}
		if set["loss"] {
			xc["loss_fn"] = *loss
		}
		if *allowNoLogprobs {
			xc["allow_training_without_logprobs"] = true
		}
		if set["trainable-tokens"] {
			xc["trainable_tokens"] = *tokens
		}
		req := training.RLRequest{ModelID: m.ID, TrajectoryGroups: groups, TrajectoryGroupsURL: *dataURL, ExperimentalConfig: mustJSON(xc)}
		if jobID, err = c.CreateRLJob(ctx, req); err != nil {
			return failJob(err)
		}
	}
	fmt.Fprintf(stdout, "job %s queued for model %s (%s)\n", jobID, refOf(m), m.ID)
	if created {
		fmt.Fprintf(stdout, "created model %s on base model %s\n", refOf(m), m.BaseModel)
	}
	for _, n := range notes {
		fmt.Fprintln(stdout, n)
	}
	if *noWatch {
		return 0
	}
	return watchJob(ctx, c, jobID, stdout, stderr)
}

// mustJSON is v (maps of flags' values) as JSON.
func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// readSFTFile reads a JSONL file of SFT chat data and checks every line's shape (the server
// checks it again with the model's template); an error names the file and line.
func readSFTFile(path string) ([]byte, int, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	n := 0
	for i, line := range bytes.Split(data, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		if _, err := trainingdata.ParseSFTLine(line); err != nil {
			return nil, 0, fmt.Errorf("%s:%d: %w (nothing was sent)", path, i+1, err)
		}
		n++
	}
	if n == 0 {
		return nil, 0, fmt.Errorf("%s has no examples (nothing was sent)", path)
	}
	return data, n, nil
}

// readGroupsFile reads a JSON array of trajectory groups; its notes say which groups teach
// nothing (every reward equal: skipped by the step).
func readGroupsFile(path string) (groups []json.RawMessage, notes []string, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(raw, &groups); err != nil {
		return nil, nil, fmt.Errorf("%s must hold a JSON array of trajectory groups: %w (nothing was sent)", path, err)
	}
	if len(groups) == 0 {
		return nil, nil, fmt.Errorf("%s holds no trajectory groups (nothing was sent)", path)
	}
	skipped := 0
	for i, g := range groups {
		var grp trainingdata.TrajectoryGroup // a missing reward is 0, as ART sends it
		if err := json.Unmarshal(g, &grp); err != nil {
			return nil, nil, fmt.Errorf("%s: group %d: %w (nothing was sent)", path, i, err)
		}
		if len(grp.Trajectories) == 0 {
			return nil, nil, fmt.Errorf("%s: group %d has no trajectories (nothing was sent)", path, i)
		}
		if !grp.Trainable() {
			skipped++
			notes = append(notes, fmt.Sprintf("group %d of %d: all %d rewards are %g, nothing to learn from: skipped", i+1, len(groups), len(grp.Trajectories), grp.Trajectories[0].Reward))
		}
	}
	if skipped == len(groups) {
		notes = append(notes, "every group was skipped: the step advances with the adapter unchanged")
	}
	return groups, notes, nil
}

const jobsUsage = `usage:
  hone jobs list   [--model ENTITY/PROJECT/NAME] [--status S] [--limit N]   newest first
  hone jobs watch  JOB_ID    follow a job's progress until it ends (exit 0 when it succeeded)
  hone jobs get    JOB_ID    print a job as JSON
  hone jobs cancel JOB_ID    cancel a queued or running job
Every command also takes --url, --key and --data (run 'hone jobs list --help').
`

func runJobs(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, jobsUsage)
		return 2
	}
	sub := args[0]
	switch sub {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, jobsUsage)
		return 0
	case "list", "watch", "get", "cancel":
	default:
		fmt.Fprintf(stderr, "hone jobs: unknown subcommand %q\n%s", sub, jobsUsage)
		return 2
	}
	name := "jobs " + sub
	fs := newFlagSet(name)
	co := clientFlags(fs)
	var model, status *string
	var limit *int
	if sub == "list" {
		model = fs.String("model", "", "only this model's jobs (ENTITY/PROJECT/NAME or id)")
		status = fs.String("status", "", "only jobs in this status: QUEUED, RUNNING, SUCCEEDED, FAILED or CANCELLED")
		limit = fs.Int("limit", 20, "at most this many jobs (1-100)")
	}
	pos, err := parseArgs(fs, args[1:])
	if code, ok := flagError(name, jobsUsage, fs, err, stdout, stderr); !ok {
		return code
	}
	switch {
	case sub == "list" && len(pos) != 0:
		fmt.Fprintf(stderr, "hone %s: takes no arguments\n", name)
		return 2
	case sub != "list" && len(pos) != 1:
		fmt.Fprintf(stderr, "hone %s: give one JOB_ID\n", name)
		return 2
	}
	fail := failer(name, stderr)
	c, err := newClient(co)
	if err != nil {
		return fail(err)
	}
	switch sub {
	case "list":
		f := client.JobFilter{Model: *model, Status: strings.ToUpper(*status), Limit: *limit}
		list, err := c.ListJobs(ctx, f)
		if err != nil {
			return fail(err)
		}
		if len(list.Data) == 0 {
			fmt.Fprintln(stdout, "no training jobs (hone train sft or hone train rl starts one)")
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tKIND\tSTATUS\tSTEP\tMODEL\tCREATED")
		for _, j := range list.Data {
			step := "-"
			if j.Step != nil {
				step = strconv.Itoa(*j.Step)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", j.ID, j.Kind, j.Status, step, j.ModelID, j.CreatedAt)
		}
		tw.Flush()
		if list.HasMore {
			fmt.Fprintf(stdout, "(more: raise --limit)\n")
		}
	case "get", "cancel":
		// Printed as the server wrote it (every field, in its order of names).
		var j map[string]any
		var err error
		if sub == "get" {
			err = c.JSON(ctx, "GET", "/v1/preview/training-jobs/"+pos[0], nil, &j)
		} else {
			err = c.JSON(ctx, "POST", "/v1/preview/training-jobs/"+pos[0]+"/cancel", map[string]any{}, &j)
		}
		if err != nil {
			return fail(err)
		}
		b, _ := json.MarshalIndent(j, "", "  ")
		fmt.Fprintln(stdout, string(b))
	case "watch":
		return watchJob(ctx, c, pos[0], stdout, stderr)
	}
	return 0
}

// watchJob follows a job's events (server-sent events) with a progress bar and the latest
// metrics (one line per step when stdout is not a terminal), and returns 0 when it succeeded.
func watchJob(ctx context.Context, c *client.Client, id string, stdout, stderr io.Writer) int {
	fail := failer("jobs watch", stderr)
	events, err := c.FollowJobEvents(ctx, id)
	if err != nil {
		return fail(err)
	}
	defer events.Close()
	tty := isTerminal(stdout)
	total, done, attempt := 0, 0, 0
	start := time.Now()
	for events.Next() {
		ev := eventOf(events.Event())
		// A job that runs again (its worker died, or was shut down) starts from its first
		// step, or goes on from a saved state (training_resumed); its events name the run.
		if a, ok := ev.Data["attempt"].(float64); ok && int(a) > attempt {
			if attempt > 0 {
				if tty && done > 0 {
					fmt.Fprintln(stdout)
				}
				fmt.Fprintf(stdout, "attempt %d: the job runs again\n", int(a))
				done = 0
			}
			attempt = int(a)
		}
		switch ev.Type {
		case "training_started":
			if n, ok := ev.Data["num_sequences"].(float64); ok {
				total = int(n)
			}
			if total == 0 {
				fmt.Fprintln(stdout, "training started: no gradient step (every group's rewards are equal)")
			} else {
				fmt.Fprintf(stdout, "training started: %d gradient step(s)\n", total)
			}
			if toks, ok := ev.Data["trainable_tokens"].([]any); ok && len(toks) > 0 {
				fmt.Fprintf(stdout, "training the embedding and LM head rows of %s beside the LoRA (trainable_tokens)\n", joinAny(toks))
			}
		case "gradient_step":
			done++
			if tty {
				fmt.Fprintf(stdout, "\r%s %s", bar(done, total, 30), metricLine(ev.Data, time.Since(start)))
			} else {
				fmt.Fprintf(stdout, "step %d/%d %s\n", done, total, metricLine(ev.Data, time.Since(start)))
			}
		case "training_interrupted":
			msg, _ := ev.Data["message"].(string)
			if tty && done > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintln(stdout, msg)
			done = 0 // the next attempt starts from the first step, or says where it resumes
		case "training_resumed":
			msg, _ := ev.Data["message"].(string)
			fmt.Fprintln(stdout, msg)
			if n, ok := ev.Data["from_step"].(float64); ok {
				done = int(n)
			}
		case "group_skipped":
			msg, _ := ev.Data["message"].(string)
			if tty && done > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintln(stdout, msg)
		case "training_ended":
			if tty && done > 0 {
				fmt.Fprintln(stdout)
			}
			fmt.Fprintf(stdout, "training ended after %s\n", time.Since(start).Round(time.Millisecond))
		case "training_failed":
			if tty && done > 0 {
				fmt.Fprintln(stdout)
			}
			msg, _ := ev.Data["error_message"].(string)
			fmt.Fprintf(stdout, "training failed: %s\n", msg)
		default: // an evaluation of the new checkpoint, a promotion, a policy run (eval_cli.go)
			printLoopEvent(stdout, ev.Type, ev.Data, false, start, new(bool))
		}
	}
	j, err := c.Job(ctx, id)
	if err != nil {
		return fail(err)
	}
	if j.Status == "SUCCEEDED" && j.Step != nil {
		ref := j.ModelID
		if m, err := c.Model(ctx, j.ModelID); err == nil {
			ref = refOf(m)
		}
		// A job adds one checkpoint, however many gradient steps (epochs × batches) it took.
		fmt.Fprintf(stdout, "job %s SUCCEEDED after %d gradient step(s): %s is now at checkpoint step %d (each job adds one); chat with model %q or %q\n",
			id, done, ref, *j.Step, fmt.Sprintf("%s:step%d", ref, *j.Step), ref+":latest")
	} else if j.ErrorMessage != nil && *j.ErrorMessage != "" {
		fmt.Fprintf(stdout, "job %s %s: %s\n", id, j.Status, *j.ErrorMessage)
	} else {
		fmt.Fprintf(stdout, "job %s %s\n", id, j.Status)
	}
	if j.Status != "SUCCEEDED" {
		return 1
	}
	return 0
}

// event is a job's event with its data decoded, for printing.
type event struct {
	Type string
	Data map[string]any
}

func eventOf(e jobs.Event) event {
	ev := event{Type: e.Type}
	json.Unmarshal(e.Data, &ev.Data)
	return ev
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
		} else if s, ok := m[k].(string); ok && want[k] { // "NaN", "Infinity": a diverged step
			parts = append(parts, k+" "+s)
		}
	}
	return strings.Join(parts, "  ") + fmt.Sprintf("  (%s)", elapsed.Round(time.Second))
}

// joinAny joins a JSON list's values with commas.
func joinAny(vs []any) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = fmt.Sprint(v)
	}
	return strings.Join(parts, ", ")
}
