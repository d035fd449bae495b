package inference

import (
	"context"
	"testing"
)

func TestRepeats(t *testing.T) {
	r := &Repetition{MaxPattern: 3, MinPattern: 2, MinCount: 3}
	cases := []struct {
		toks []int
		want bool
	}{
		{[]int{1, 2, 1, 2, 1, 2}, true},             // pattern 2 three times
		{[]int{9, 1, 2, 3, 1, 2, 3, 1, 2, 3}, true}, // pattern 3 three times
		{[]int{1, 2, 1, 2}, false},                  // only twice
		{[]int{5, 5, 5, 5, 5, 5}, true},             // 5 5 repeated (size 2) counts
		{[]int{1, 2, 1, 2, 1, 3}, false},
		{[]int{}, false},
	}
	for _, c := range cases {
		if got := r.Repeats(c.toks); got != c.want {
			t.Errorf("%v: %v, want %v", c.toks, got, c.want)
		}
	}
	// Size 1 is excluded by MinPattern 2 only when no larger size matches: 7 7 7 alone.
	if r.Repeats([]int{4, 7, 7, 7}) {
		t.Error("single-token run matched with min_pattern_size 2")
	}
	if !(&Repetition{MaxPattern: 1, MinCount: 3}).Repeats([]int{4, 7, 7, 7}) {
		t.Error("min_pattern_size 0 means 1")
	}
	if (&Repetition{MaxPattern: 0, MinCount: 3}).Repeats([]int{7, 7, 7}) || (&Repetition{MaxPattern: 2, MinCount: 1}).Repeats([]int{7, 7, 7}) {
		t.Error("disabled detection matched")
	}
}

// TestRepetitionFinish: greedy decoding of the tiny model falls into a loop; with detection on
// the choice ends with "repetition" exactly where the loop is first complete.
func TestRepetitionFinish(t *testing.T) {
	m := tiny(t)
	e := New(m, Options{})
	defer e.Close()
	prompt := []int{11, 12, 13}
	free := greedyDirect(m, prompt, 80)
	rep := &Repetition{MaxPattern: 6, MinCount: 3}
	stopAt := -1
	for k := 1; k <= len(free); k++ {
		if rep.Repeats(free[:k]) {
			stopAt = k
			break
		}
	}
	if stopAt < 0 {
		t.Fatalf("greedy output of the tiny model never loops: %v", free)
	}
	h, err := e.Submit(context.Background(), &Request{Prompt: prompt, Params: greedy(), MaxTokens: 80, IgnoreEOS: true, Repetition: rep})
	if err != nil {
		t.Fatal(err)
	}
	var toks []int
	finish := ""
	for ev := range h.Events() {
		if ev.HasToken {
			toks = append(toks, ev.Token)
		}
		if ev.Finish != "" {
			finish = ev.Finish
		}
	}
	if finish != "repetition" || len(toks) != stopAt {
		t.Fatalf("finish %q after %d tokens, want repetition after %d (%v)", finish, len(toks), stopAt, free)
	}
}
