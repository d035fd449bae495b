package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/honeai/hone/internal/client"
)

func init() {
	register("eval", "evaluate a model or checkpoint on a Hone server with its built-in scorers (a Weave Evaluation)", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runEval(ctx, args, os.Stdout, os.Stderr)
	})
}

const evalUsage = `usage: hone eval --model MODEL (--dataset REF | --file ROWS.jsonl) --scorer SCORER [--scorer ...]
                 [--name N] [--project P] [--input-field F] [--limit N]
                 [--max-tokens N] [--temperature T] [--system TEXT] [--promote ALIAS] [--no-wait]
       hone eval --model MODEL --evaluation weave:///ENTITY/PROJECT/object/NAME:VERSION

Evaluates MODEL (a served model, or ENTITY/PROJECT/NAME[:stepN|:latest|:ALIAS]) on the rows of a
Weave Dataset or table (--dataset) or of a JSONL file (--file, uploaded first), as a job on the
server's queue, and stores the result as a Weave Evaluation in the trace project (Studio's
evaluation pages compare it with others). A row is {"messages": [...]} (a final assistant
message is the expected answer) or {"question"|"prompt"|"input": "...", "answer": ...}.

A SCORER is a type — exact_match, contains, regex, json_schema, numeric, tool_call, judge — or
its JSON, for example:
  --scorer exact_match
  --scorer '{"type":"contains","value":"Paris","ignore_case":true}'
  --scorer '{"type":"regex","pattern":"^\\d+$"}'
  --scorer '{"type":"numeric","field":"answer","tolerance":0.01}'
  --scorer '{"type":"judge","model":"smol","prompt":"Q: {input}\nA: {output}\nCorrect?","choices":{"yes":1,"no":0}}'
--scorers FILE reads a JSON list of them. It prints the progress, then the summary.
`

func runEval(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	const name = "eval"
	fs := newFlagSet(name)
	co := clientFlags(fs)
	model := fs.String("model", "", "the model or checkpoint to evaluate (required)")
	dataset := fs.String("dataset", "", "a weave:/// Dataset or table ref of the rows")
	file := fs.String("file", "", "a JSONL file of the rows (uploaded to the server)")
	evalRef := fs.String("evaluation", "", "an Evaluation Hone stored before, to run again (its ref)")
	evalName := fs.String("name", "", "the Evaluation's name (default: eval)")
	project := fs.String("project", "", "trace project of the Evaluation (default: the trained model's; required for a served model)")
	var scorers multiFlag
	fs.Var(&scorers, "scorer", "a scorer: its type or its JSON (repeatable)")
	scorersFile := fs.String("scorers", "", "a JSON file with a list of scorers")
	inputField := fs.String("input-field", "", "the row field that holds the prompt (default: messages, else prompt, question, input, query)")
	limit := fs.Int("limit", 0, "evaluate the first N rows only (0: all)")
	maxTokens := fs.Int("max-tokens", 0, "most tokens of a reply (default 256)")
	temperature := fs.Float64("temperature", 0, "sampling temperature (default 0: greedy)")
	system := fs.String("system", "", "a system message before each row")
	promote := fs.String("promote", "", "move this alias of the model to the checkpoint when its promotion rule says so")
	noWait := fs.Bool("no-wait", false, "queue the job and print its id without following it")
	if code, ok := flagsOnly(name, evalUsage, fs, fs.Parse(args), stdout, stderr); !ok {
		return code
	}
	if *model == "" {
		fmt.Fprintf(stderr, "hone eval: --model is required\nRun 'hone eval --help' for its flags.\n")
		return 2
	}
	req := map[string]any{"model": *model}
	if *project != "" {
		req["project"] = *project
	}
	if *promote != "" {
		req["promote"] = *promote
	}
	fail := failer(name, stderr)
	c, err := newClient(co)
	if err != nil {
		return fail(err)
	}
	if *evalRef != "" {
		if *dataset != "" || *file != "" || len(scorers) > 0 || *scorersFile != "" {
			fmt.Fprintf(stderr, "hone eval: --evaluation runs a stored Evaluation: give no --dataset, --file or scorers\n")
			return 2
		}
		req["evaluation"] = *evalRef
	} else {
		if (*dataset == "") == (*file == "") {
			fmt.Fprintf(stderr, "hone eval: give the rows with --dataset REF or --file ROWS.jsonl (one of them)\nRun 'hone eval --help' for its flags.\n")
			return 2
		}
		list, err := parseScorers(scorers, *scorersFile)
		if err != nil {
			fmt.Fprintf(stderr, "hone eval: %v\n", err)
			return 2
		}
		if len(list) == 0 {
			fmt.Fprintf(stderr, "hone eval: give at least one --scorer (exact_match, contains, regex, json_schema, numeric, tool_call, judge)\n")
			return 2
		}
		req["scorers"] = list
		if *evalName == "" {
			*evalName = "eval"
		}
		req["name"] = *evalName
		if *file != "" {
			data, err := os.ReadFile(*file)
			if err != nil {
				return fail(err)
			}
			up, err := c.UploadFile(ctx, data, "application/jsonl")
			if err != nil {
				return fail(fmt.Errorf("uploading %s: %w", *file, err))
			}
			*dataset = up.URL
		}
		req["dataset"] = *dataset
		if *inputField != "" {
			req["input_field"] = *inputField
		}
		if *limit > 0 {
			req["limit"] = *limit
		}
		gen := map[string]any{}
		if *maxTokens > 0 {
			gen["max_tokens"] = *maxTokens
		}
		if *temperature > 0 {
			gen["temperature"] = *temperature
		}
		if *system != "" {
			gen["system"] = *system
		}
		if len(gen) > 0 {
			req["generation"] = gen
		}
	}
	// The fields are sent as a map: the server tells one left out from one sent empty.
	job, err := c.CreateEvaluationJob(ctx, req)
	if err != nil {
		return fail(err)
	}
	fmt.Fprintf(stdout, "evaluation job %s: %s with %s (%s)\n", job.ID, job.ModelName, job.Evaluation, job.EvaluationRef)
	if *noWait {
		return 0
	}
	return watchEvaluation(ctx, c, job.ID, stdout, stderr)
}

// parseScorers reads --scorer values (a type or JSON) and a --scorers file.
func parseScorers(flags []string, file string) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for _, f := range flags {
		f = strings.TrimSpace(f)
		if strings.HasPrefix(f, "{") {
			if !json.Valid([]byte(f)) {
				return nil, fmt.Errorf("--scorer %s is not JSON", f)
			}
			out = append(out, json.RawMessage(f))
			continue
		}
		b, _ := json.Marshal(map[string]string{"type": f})
		out = append(out, b)
	}
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		var list []json.RawMessage
		if err := json.Unmarshal(data, &list); err != nil {
			return nil, fmt.Errorf("--scorers %s: not a JSON list of scorers: %w", file, err)
		}
		out = append(out, list...)
	}
	return out, nil
}

// watchEvaluation follows an evaluation job's events with its progress and prints the
// summary; 0 when it succeeded.
func watchEvaluation(ctx context.Context, c *client.Client, id string, stdout, stderr io.Writer) int {
	fail := failer("eval", stderr)
	events, err := c.FollowEvaluationEvents(ctx, id)
	if err != nil {
		return fail(err)
	}
	defer events.Close()
	tty := isTerminal(stdout)
	start := time.Now()
	inBar := false
	for events.Next() {
		ev := eventOf(events.Event())
		if inBar && ev.Type != "evaluation_progress" {
			fmt.Fprintln(stdout)
			inBar = false
		}
		printLoopEvent(stdout, ev.Type, ev.Data, tty, start, &inBar)
	}
	j, err := c.EvaluationJob(ctx, id)
	if err != nil {
		return fail(err)
	}
	if j.Status != "SUCCEEDED" {
		msg := ""
		if j.ErrorMessage != nil {
			msg = ": " + *j.ErrorMessage
		}
		fmt.Fprintf(stdout, "evaluation job %s %s%s\n", id, j.Status, msg)
		return 1
	}
	fmt.Fprintf(stdout, "evaluation job %s SUCCEEDED: %s on %s\n%s", id, j.Evaluation, j.ModelName, metricTable(j.Metrics))
	if j.URL != "" {
		fmt.Fprintf(stdout, "in Hone Studio: %s%s\n", c.URL, j.URL)
	}
	return 0
}

// metricTable prints metrics one per line, by name.
func metricTable(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "  %-24s %.4g\n", k, m[k])
	}
	return b.String()
}

// printLoopEvent prints an event of the improvement loop (evaluations, promotions, policy
// runs) for `hone eval` and `hone jobs watch`; other events print nothing.
func printLoopEvent(w io.Writer, typ string, d map[string]any, tty bool, start time.Time, inBar *bool) {
	str := func(k string) string { s, _ := d[k].(string); return s }
	num := func(k string) int { f, _ := d[k].(float64); return int(f) }
	switch typ {
	case "evaluation_started":
		msg := fmt.Sprintf("evaluating %s with %s: %d row(s)", str("model"), str("evaluation"), num("num_rows"))
		if n := num("done_rows"); n > 0 {
			msg += fmt.Sprintf(", %d recorded by an earlier run", n)
		}
		fmt.Fprintln(w, msg)
	case "evaluation_progress":
		scores := map[string]float64{}
		if m, ok := d["scores"].(map[string]any); ok {
			for k, v := range m {
				if f, ok := v.(float64); ok && k != "model_latency" {
					scores[k] = f
				}
			}
		}
		keys := make([]string, 0, len(scores))
		for k := range scores {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %.3g", k, scores[k]))
		}
		line := fmt.Sprintf("%s %s  (%s)", bar(num("rows_done"), num("num_rows"), 30), strings.Join(parts, "  "), time.Since(start).Round(time.Second))
		if tty {
			fmt.Fprint(w, "\r"+line)
			*inBar = true
		} else {
			fmt.Fprintln(w, line)
		}
	case "evaluation_ended":
		fmt.Fprintf(w, "evaluated %s with %s\n", str("model"), str("evaluation"))
	case "checkpoint_saved", "promotion_decided", "policy_run_started", "dataset_built", "policy_run_skipped", "policy_run_ended":
		if m := str("message"); m != "" {
			fmt.Fprintln(w, m)
		}
	case "training_failed":
		fmt.Fprintf(w, "failed: %s\n", str("error_message"))
	}
}
