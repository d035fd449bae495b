package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
)

func init() {
	register("policy", "a model's training policy (train from liked calls, evaluate, promote): set, get, pause, resume, run, runs, delete", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runPolicy(ctx, args, os.Stdout, os.Stderr)
	})
}

const policyUsage = `usage:
  hone policy set    --model E/P/NAME --alias A [--project P] [--kind sft|rl] [--every-calls N] [--interval D]
                     [--feedback 👍] [--config JSON] [--experimental-config JSON] [--paused]
  hone policy get    --model E/P/NAME
  hone policy pause  --model E/P/NAME
  hone policy resume --model E/P/NAME
  hone policy run    --model E/P/NAME [--reason TEXT] [--no-wait]
  hone policy runs   --model E/P/NAME
  hone policy delete --model E/P/NAME

A training policy trains the model again from what users liked: from the trace project P,
every N new calls with feedback (or every interval D, such as 6h, when some came), a run
builds the dataset (SFT from the 👍 replies, or RL groups rewarded by the feedback), trains
from the checkpoint alias A points at, evaluates the new checkpoint with A's promotion rule's
Evaluation and moves A when the rule says so. Each run is a job (hone jobs watch ID). Off until
set; "run" starts one now.
`

func runPolicy(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, policyUsage)
		return 2
	}
	sub := args[0]
	switch sub {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, policyUsage)
		return 0
	case "set", "get", "pause", "resume", "run", "runs", "delete":
	default:
		fmt.Fprintf(stderr, "hone policy: unknown subcommand %q\n\n%s", sub, policyUsage)
		return 2
	}
	name := "policy " + sub
	fs := newFlagSet(name)
	co := clientFlags(fs)
	model := fs.String("model", "", "the model, E/P/NAME or its id (required)")
	alias := fs.String("alias", "", "the alias trained from and promoted (it needs a promotion rule)")
	project := fs.String("project", "", "trace project of the calls (default: the model's)")
	kind := fs.String("kind", "sft", "sft (the liked replies) or rl (groups rewarded by feedback)")
	every := fs.Int("every-calls", 0, "start a run when this many calls got feedback since the last")
	interval := fs.String("interval", "", "start a run when this long passed since the last (and some calls got feedback)")
	feedback := fs.String("feedback", "", "the reaction that selects the calls (default for sft: 👍; up/down stand for 👍/👎)")
	config := fs.String("config", "", "the training job's config (JSON), as SFT jobs take it")
	expConfig := fs.String("experimental-config", "", "the training job's experimental_config (JSON)")
	paused := fs.Bool("paused", false, "set the policy paused")
	reason := fs.String("reason", "", "why a run is started by hand")
	noWait := fs.Bool("no-wait", false, "start the run without following it")
	if code, ok := flagsOnly(name, policyUsage, fs, fs.Parse(args[1:]), stdout, stderr); !ok {
		return code
	}
	if *model == "" {
		fmt.Fprintf(stderr, "hone %s: --model is required\nRun 'hone policy --help' for its usage.\n", name)
		return 2
	}
	fail := failer(name, stderr)
	c, err := newClient(co)
	if err != nil {
		return fail(err)
	}
	path := "/v1/preview/models/" + *model + "/policy"
	var v map[string]any
	switch sub {
	case "set":
		req := map[string]any{"alias": *alias, "kind": *kind, "paused": *paused}
		if *project != "" {
			req["project"] = *project
		}
		if *every > 0 {
			req["every_calls"] = *every
		}
		if *interval != "" {
			req["interval"] = *interval
		}
		if *feedback != "" {
			r := *feedback
			switch r {
			case "up":
				r = "👍"
			case "down":
				r = "👎"
			}
			req["feedback"] = map[string]string{"reaction": r}
		}
		for flag, raw := range map[string]string{"config": *config, "experimental_config": *expConfig} {
			if raw == "" {
				continue
			}
			if !json.Valid([]byte(raw)) {
				fmt.Fprintf(stderr, "hone %s: --%s is not JSON\n", name, flag)
				return 2
			}
			req[flag] = json.RawMessage(raw)
		}
		b, _ := json.Marshal(req)
		if err := c.Do(ctx, "PUT", path, bytes.NewReader(b), "application/json", &v); err != nil {
			return fail(err)
		}
	case "get":
		if err := c.Do(ctx, "GET", path, nil, "", &v); err != nil {
			return fail(err)
		}
	case "pause", "resume":
		if err := c.Do(ctx, "POST", path+"/"+sub, nil, "", &v); err != nil {
			return fail(err)
		}
	case "delete":
		if err := c.Do(ctx, "DELETE", path, nil, "", nil); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s has no training policy now (its runs stay listed)\n", *model)
		return 0
	case "run":
		b, _ := json.Marshal(map[string]string{"reason": *reason})
		var j struct {
			ID string `json:"id"`
		}
		if err := c.Do(ctx, "POST", path+"/run", bytes.NewReader(b), "application/json", &j); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "policy run %s queued\n", j.ID)
		if *noWait {
			return 0
		}
		return watchJob(ctx, c, j.ID, stdout, stderr)
	case "runs":
		var l struct {
			Data []struct {
				JobID   string `json:"job_id"`
				Status  string `json:"status"`
				Trigger struct {
					Reason  string `json:"reason"`
					Message string `json:"message"`
				} `json:"trigger"`
				Result struct {
					Rows     int    `json:"rows"`
					Step     *int   `json:"step"`
					Skipped  string `json:"skipped"`
					Decision *struct {
						Message string `json:"message"`
					} `json:"decision"`
				} `json:"result"`
				CreatedAt string `json:"created_at"`
			} `json:"data"`
		}
		if err := c.Do(ctx, "GET", path+"/runs", nil, "", &l); err != nil {
			return fail(err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "JOB\tSTARTED\tSTATUS\tTRIGGER\tROWS\tSTEP\tOUTCOME")
		for _, r := range l.Data {
			step, outcome := "-", ""
			if r.Result.Step != nil {
				step = fmt.Sprint(*r.Result.Step)
			}
			switch {
			case r.Result.Decision != nil:
				outcome = r.Result.Decision.Message
			case r.Result.Skipped != "":
				outcome = "nothing to train on: " + r.Result.Skipped
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.JobID, r.CreatedAt, r.Status, r.Trigger.Reason, r.Result.Rows, step, outcome)
		}
		tw.Flush()
		return 0
	}
	state := "active"
	if p, _ := v["paused"].(bool); p {
		state = "paused"
	}
	trigger := ""
	if n, ok := v["every_calls"].(float64); ok && n > 0 {
		trigger = fmt.Sprintf("every %d liked calls", int(n))
	}
	if iv, ok := v["interval"].(string); ok && iv != "" {
		if trigger != "" {
			trigger += " or "
		}
		trigger += "every " + iv
	}
	fmt.Fprintf(stdout, "%s: %s policy, %s, training %s:%s from %s (%v new calls with feedback)\n", v["model"], state, trigger, v["model"], v["alias"], v["project"], v["new_calls"])
	return 0
}
