package evaluation

import (
	"encoding/json"
	"math"
	"sort"
)

// rowResult is one scored row: each scorer's value (a bool, a number, or nil when the
// scorer could not score it) and the seconds the model took.
type rowResult struct {
	Scores  map[string]any
	Latency float64
}

// summarize is the Weave Evaluation summary (Evaluation.summarize's output): for each
// scorer {true_count, true_fraction} of a pass/fail scorer or {mean} of a numeric one, over
// the rows it scored, and model_latency {mean}.
func summarize(scorers []Scorer, rows []rowResult) map[string]any {
	out := map[string]any{}
	for _, sc := range scorers {
		trues, bools, sum, nums := 0, 0, 0.0, 0
		for _, r := range rows {
			switch v := r.Scores[sc.Name].(type) {
			case bool:
				bools++
				if v {
					trues++
				}
			case float64:
				nums++
				sum += v
			}
		}
		switch {
		case bools > 0 && nums == 0:
			out[sc.Name] = map[string]any{"true_count": trues, "true_fraction": float64(trues) / float64(bools)}
		case nums > 0:
			// A scorer that gave numbers and booleans counts the booleans as 1 and 0.
			out[sc.Name] = map[string]any{"mean": (sum + float64(trues)) / float64(nums+bools)}
		default:
			out[sc.Name] = map[string]any{"mean": nil}
		}
	}
	lat := 0.0
	for _, r := range rows {
		lat += r.Latency
	}
	if len(rows) > 0 {
		lat /= float64(len(rows))
	}
	out["model_latency"] = map[string]any{"mean": lat}
	return out
}

// Metrics reads an evaluation summary as numbers by name: each entry's true_fraction or
// mean under its own name (exact_match, model_latency; true_count left out), other numbers
// under their dotted path, nested entries by their path (a Weave scorer that returns
// {"correct": bool} gives exact.correct). Entries without a number are left out.
func Metrics(summary json.RawMessage) map[string]float64 {
	var v any
	json.Unmarshal(summary, &v)
	out := map[string]float64{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				name := k
				if prefix != "" {
					name = prefix + "." + k
				}
				if k == "true_count" && prefix != "" {
					continue // the fraction says it, as a metric that compares across sizes
				}
				if (k == "mean" || k == "true_fraction") && prefix != "" {
					if f, ok := x[k].(float64); ok && !math.IsNaN(f) {
						out[prefix] = f
					}
					continue
				}
				walk(name, x[k])
			}
		case float64:
			if prefix != "" && !math.IsNaN(x) && !math.IsInf(x, 0) {
				out[prefix] = x
			}
		case bool:
			if prefix != "" {
				out[prefix] = map[bool]float64{true: 1, false: 0}[x]
			}
		}
	}
	walk("", v)
	return out
}
