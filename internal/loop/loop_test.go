package loop

import "testing"

func TestRuleBeats(t *testing.T) {
	f := false
	for _, c := range []struct {
		r        Rule
		cand, cu float64
		want     bool
	}{
		{Rule{Metric: "exact_match"}, 0.5, 0.4, true},
		{Rule{Metric: "exact_match"}, 0.4, 0.4, false}, // equal does not beat
		{Rule{Metric: "exact_match", Margin: 0.1}, 0.5, 0.4, false},
		{Rule{Metric: "exact_match", Margin: 0.1}, 0.51, 0.4, true},
		{Rule{Metric: "model_latency"}, 0.3, 0.4, true}, // lower is better by default
		{Rule{Metric: "model_latency"}, 0.5, 0.4, false},
		{Rule{Metric: "loss", HigherIsBetter: &f, Margin: 0.05}, 0.3, 0.4, true},
		{Rule{Metric: "loss", HigherIsBetter: &f, Margin: 0.2}, 0.3, 0.4, false},
	} {
		if got := c.r.beats(c.cand, c.cu); got != c.want {
			t.Errorf("%+v: %v beats %v = %v", c.r, c.cand, c.cu, got)
		}
	}
}
