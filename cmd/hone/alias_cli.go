package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
)

func init() {
	register("alias", "aliases of a model's checkpoints (local/p/agent:prod): list, set, rollback, history, rule, delete", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runAlias(ctx, args, os.Stdout, os.Stderr)
	})
}

const aliasUsage = `usage:
  hone alias list     --model E/P/NAME
  hone alias set      --model E/P/NAME --alias A --step N [--reason TEXT]
  hone alias rollback --model E/P/NAME --alias A [--reason TEXT]
  hone alias history  --model E/P/NAME [--alias A] [--limit N]
  hone alias rule     --model E/P/NAME --alias A --evaluation REF --metric M [--margin X] [--lower-is-better] [--reason TEXT]
  hone alias rule     --model E/P/NAME --alias A --remove
  hone alias delete   --model E/P/NAME --alias A [--reason TEXT]

An alias names one of a model's checkpoints (step 0: the base model); chat takes
E/P/NAME:ALIAS like :latest. Every move is recorded with who made it and why. A promotion rule
moves the alias to a new checkpoint only when the checkpoint's run of an Evaluation beats the
current one's on a metric by more than a margin (training jobs and evaluation jobs that name
the alias in promote, and training policies, apply it).
`

func runAlias(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, aliasUsage)
		return 2
	}
	sub := args[0]
	switch sub {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, aliasUsage)
		return 0
	case "list", "set", "rollback", "history", "rule", "delete":
	default:
		fmt.Fprintf(stderr, "hone alias: unknown subcommand %q\n\n%s", sub, aliasUsage)
		return 2
	}
	name := "alias " + sub
	fs := newFlagSet(name)
	co := clientFlags(fs)
	model := fs.String("model", "", "the model, E/P/NAME or its id (required)")
	alias := fs.String("alias", "", "the alias")
	step := fs.Int("step", -1, "the checkpoint step the alias names (0: the base model)")
	reason := fs.String("reason", "", "why (recorded with the change)")
	limit := fs.Int("limit", 20, "how many events (history)")
	evalRef := fs.String("evaluation", "", "the Evaluation the rule decides by (its ref)")
	metric := fs.String("metric", "", "the metric the rule compares")
	margin := fs.Float64("margin", 0, "how much the candidate must beat the current checkpoint by")
	lower := fs.Bool("lower-is-better", false, "a lower value of the metric is better")
	remove := fs.Bool("remove", false, "remove the rule")
	if code, ok := flagsOnly(name, aliasUsage, fs, fs.Parse(args[1:]), stdout, stderr); !ok {
		return code
	}
	usage := func(msg string) int {
		fmt.Fprintf(stderr, "hone %s: %s\nRun 'hone alias --help' for its usage.\n", name, msg)
		return 2
	}
	if *model == "" {
		return usage("--model is required")
	}
	if sub != "list" && sub != "history" && *alias == "" {
		return usage("--alias is required")
	}
	fail := failer(name, stderr)
	c, err := newClient(co)
	if err != nil {
		return fail(err)
	}
	base := "/v1/preview/models/" + *model + "/aliases"
	type aliasView struct {
		Alias     string          `json:"alias"`
		Step      int             `json:"step"`
		Name      string          `json:"name"`
		Serves    string          `json:"serves"`
		Rule      json.RawMessage `json:"rule"`
		UpdatedAt string          `json:"updated_at"`
		UpdatedBy string          `json:"updated_by"`
		Reason    string          `json:"reason"`
	}
	body := func(v any) io.Reader { b, _ := json.Marshal(v); return bytes.NewReader(b) }
	var v aliasView
	switch sub {
	case "list":
		var l struct {
			Data []aliasView `json:"data"`
		}
		if err := c.Do(ctx, "GET", base, nil, "", &l); err != nil {
			return fail(err)
		}
		if len(l.Data) == 0 {
			fmt.Fprintf(stdout, "%s has no aliases (hone alias set --model %s --alias prod --step N)\n", *model, *model)
			return 0
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ALIAS\tCHECKPOINT\tRULE\tUPDATED\tBY\tREASON")
		for _, a := range l.Data {
			rule := "-"
			if len(a.Rule) > 0 && string(a.Rule) != "null" {
				var r struct {
					Metric string  `json:"metric"`
					Margin float64 `json:"margin"`
				}
				json.Unmarshal(a.Rule, &r)
				rule = fmt.Sprintf("%s +%g", r.Metric, r.Margin)
			}
			fmt.Fprintf(tw, "%s\tstep %d\t%s\t%s\t%s\t%s\n", a.Alias, a.Step, rule, a.UpdatedAt, a.UpdatedBy, a.Reason)
		}
		tw.Flush()
		return 0
	case "set":
		if *step < 0 {
			return usage("--step is required (0: the base model)")
		}
		if err := c.Do(ctx, "PUT", base+"/"+*alias, body(map[string]any{"step": *step, "reason": *reason}), "application/json", &v); err != nil {
			return fail(err)
		}
	case "rollback":
		if err := c.Do(ctx, "POST", base+"/"+*alias+"/rollback", body(map[string]any{"reason": *reason}), "application/json", &v); err != nil {
			return fail(err)
		}
	case "delete":
		if err := c.Do(ctx, "DELETE", base+"/"+*alias, body(map[string]any{"reason": *reason}), "application/json", nil); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "deleted %s:%s (its history stays)\n", *model, *alias)
		return 0
	case "rule":
		if *remove {
			if err := c.Do(ctx, "DELETE", base+"/"+*alias+"/rule", body(map[string]any{"reason": *reason}), "application/json", &v); err != nil {
				return fail(err)
			}
			fmt.Fprintf(stdout, "%s has no promotion rule now\n", v.Name)
			return 0
		}
		if *evalRef == "" || *metric == "" {
			return usage("--evaluation and --metric are required (or --remove)")
		}
		req := map[string]any{"evaluation": *evalRef, "metric": *metric, "margin": *margin, "reason": *reason}
		if *lower {
			req["higher_is_better"] = false
		}
		if err := c.Do(ctx, "PUT", base+"/"+*alias+"/rule", body(req), "application/json", &v); err != nil {
			return fail(err)
		}
		fmt.Fprintf(stdout, "%s is promoted by %s\n", v.Name, v.Rule)
		return 0
	case "history":
		path := "/v1/preview/models/" + *model + "/alias-events"
		if *alias != "" {
			path = base + "/" + *alias + "/history"
		}
		var l struct {
			Data []struct {
				Alias     string          `json:"alias"`
				Kind      string          `json:"kind"`
				From      *int            `json:"from_step"`
				To        *int            `json:"to_step"`
				Actor     string          `json:"actor"`
				Reason    string          `json:"reason"`
				Data      json.RawMessage `json:"data"`
				CreatedAt string          `json:"created_at"`
			} `json:"data"`
		}
		if err := c.Do(ctx, "GET", path+"?limit="+url.QueryEscape(fmt.Sprint(*limit)), nil, "", &l); err != nil {
			return fail(err)
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "WHEN\tALIAS\tEVENT\tSTEPS\tBY\tWHY")
		for _, e := range l.Data {
			steps := "-"
			switch {
			case e.From != nil && e.To != nil:
				steps = fmt.Sprintf("%d -> %d", *e.From, *e.To)
			case e.To != nil:
				steps = fmt.Sprintf("-> %d", *e.To)
			case e.From != nil:
				steps = fmt.Sprintf("%d ->", *e.From)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", e.CreatedAt, e.Alias, e.Kind, steps, e.Actor, strings.ReplaceAll(e.Reason, "\n", " "))
		}
		tw.Flush()
		return 0
	}
	fmt.Fprintf(stdout, "%s -> step %d (%s)\n", v.Name, v.Step, v.Serves)
	return 0
}
