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
)

func init() {
	register("datasets", "training data from traces: from-calls (traced chat completions as a Weave Dataset)", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runDatasets(ctx, args, os.Stdout, os.Stderr)
	})
}

const datasetsUsage = `usage:
  hone datasets from-calls --project P [--op NAME] [--feedback REACTION] [--query JSON]
                           [--name N] [--kind sft|rl] [--limit N] [--model E/P/NAME]

Builds a Weave Dataset in the trace project <entity>/P from its traced chat completions (the
calls Hone records for /v1/chat/completions with the X-Hone-Trace-Project header, and those the
weave SDK records for openai's chat.completions.create), filtered by op, feedback (a reaction
such as 👍; "up" and "down" stand for 👍 and 👎) and a Weave calls query ({"$expr": ...}, as
/calls/stream_query takes). SFT rows are {"messages": [...request messages, the reply]};
RL rows are ART trajectory groups (calls with the same prompt, reward from their feedback).
It prints the dataset's ref and the command that trains on it.
`

func runDatasets(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, datasetsUsage)
		return 2
	}
	switch args[0] {
	case "-h", "--help", "help":
		fmt.Fprint(stdout, datasetsUsage)
		return 0
	case "from-calls":
	default:
		fmt.Fprintf(stderr, "hone datasets: unknown subcommand %q\n\n%s", args[0], datasetsUsage)
		return 2
	}
	const name = "datasets from-calls"
	fs := newFlagSet(name)
	co := clientFlags(fs)
	entity := fs.String("entity", "", "entity of the trace project (default: the API key's)")
	project := fs.String("project", "", "trace project whose calls to read (required)")
	var ops multiFlag
	fs.Var(&ops, "op", "op name of the calls (repeatable; default openai.chat.completions.create)")
	reaction := fs.String("feedback", "", "keep only calls with this reaction (👍, 👎, or up/down)")
	feedbackType := fs.String("feedback-type", "", "keep only calls with a feedback of this type")
	query := fs.String("query", "", `Weave calls query, e.g. '{"$expr":{"$contains":{"input":{"$getField":"inputs.messages.0.content"},"substr":{"$literal":"capital"}}}}'`)
	dsName := fs.String("name", "", "dataset name (default <project>-<kind>)")
	kind := fs.String("kind", "sft", "sft (chat examples) or rl (ART trajectory groups)")
	limit := fs.Int("limit", 0, "at most this many calls (default: all)")
	modelRef := fs.String("model", "", "ENTITY/PROJECT/NAME to train, for the printed next command (default <entity>/<project>/agent)")
	if code, ok := flagsOnly(name, datasetsUsage, fs, fs.Parse(args[1:]), stdout, stderr); !ok {
		return code
	}
	if *project == "" {
		fmt.Fprintf(stderr, "hone %s: --project is required\n", name)
		return 2
	}
	body := map[string]any{"project": *project, "kind": *kind}
	if *entity != "" {
		body["entity"] = *entity
	}
	if len(ops) > 0 {
		body["op_names"] = []string(ops)
	}
	fb := map[string]string{}
	switch *reaction {
	case "":
	case "up", "+1", "thumbsup":
		fb["reaction"] = "👍"
	case "down", "-1", "thumbsdown":
		fb["reaction"] = "👎"
	default:
		fb["reaction"] = *reaction
	}
	if *feedbackType != "" {
		fb["feedback_type"] = *feedbackType
	}
	if len(fb) > 0 {
		body["feedback"] = fb
	}
	if *query != "" {
		if !json.Valid([]byte(*query)) {
			fmt.Fprintf(stderr, "hone %s: --query is not JSON: %s\n", name, *query)
			return 2
		}
		body["query"] = json.RawMessage(*query)
	}
	if *dsName != "" {
		body["name"] = *dsName
	}
	if *limit > 0 {
		body["limit"] = *limit
	}
	fail := failer(name, stderr)
	c, err := newClient(co)
	if err != nil {
		return fail(err)
	}
	// The fields are sent as a map: the server tells one left out from one sent empty.
	res, err := c.DatasetFromCalls(ctx, body)
	if err != nil {
		return fail(err)
	}
	what := "examples"
	if res.Kind == "rl" {
		what = "trajectory groups"
	}
	fmt.Fprintf(stdout, "dataset %s\n", res.DatasetRef)
	fmt.Fprintf(stdout, "%d %s (rows of table %s) from %d calls\n", res.Rows, what, res.TableRef, res.Calls)
	if res.Skipped > 0 {
		keys := make([]string, 0, len(res.SkippedReasons))
		for k := range res.SkippedReasons {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(stdout, "%d calls skipped:\n", res.Skipped)
		for _, k := range keys {
			fmt.Fprintf(stdout, "  %d: %s\n", res.SkippedReasons[k], k)
		}
	}
	model := *modelRef
	if model == "" {
		e := *entity
		if e == "" {
			// weave:///<entity>/<project>/object/...
			e, _, _ = strings.Cut(strings.TrimPrefix(res.DatasetRef, "weave:///"), "/")
		}
		model = e + "/" + *project + "/agent"
	}
	next := fmt.Sprintf("hone train %s --model %s --data-url %s", res.Kind, model, res.TrainingDataURL)
	if res.Kind == "rl" && res.WithoutLogprobs > 0 {
		next += " --allow-training-without-logprobs"
	}
	fmt.Fprintf(stdout, "next: %s\n", next)
	return 0
}

// multiFlag is a repeatable string flag.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }
