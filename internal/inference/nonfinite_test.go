package inference

import (
	"context"
	"math"
	"testing"

	"github.com/honeai/hone/internal/model"
)

// TestNonFiniteLogitsEndWithError: an adapter holding NaN (a checkpoint of diverged
// training) makes every logit NaN; the engine samples nothing from them (no token 0, which
// decodes to NUL) and ends the choice with FinishError.
func TestNonFiniteLogitsEndWithError(t *testing.T) {
	m := tiny(t)
	defer m.Close()
	a := nanAdapter(m)
	e := New(m, Options{})
	defer e.Close()
	for _, req := range []*Request{
		{Prompt: []int{1, 2, 3}, Params: greedy(), N: 2, MaxTokens: 4, Adapter: a, Logprobs: true},
		// Beam search ranks beams by their logprobs: none can be ranked by NaN.
		{Prompt: []int{1, 2, 3}, Params: greedy(), MaxTokens: 4, Adapter: a, Logprobs: true, Beam: &Beam{Width: 2, LengthPenalty: 1}},
	} {
		h, err := e.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		finish := map[int]string{}
		for ev := range h.Events() {
			if ev.HasToken {
				t.Fatalf("beam %v: a token was sampled from NaN logits: %+v", req.Beam != nil, ev)
			}
			if ev.Finish != "" {
				finish[ev.Choice] = ev.Finish
			}
		}
		if len(finish) != 2 || finish[0] != FinishError || finish[1] != FinishError {
			t.Fatalf("beam %v: finish reasons %v", req.Beam != nil, finish)
		}
	}
	// The engine goes on serving.
	h, err := e.Submit(context.Background(), &Request{Prompt: []int{1, 2, 3}, Params: greedy(), MaxTokens: 2, Beam: &Beam{Width: 2, LengthPenalty: 1}})
	if err != nil {
		t.Fatal(err)
	}
	tokens := 0
	for ev := range h.Events() {
		if ev.HasToken {
			tokens++
		}
		if ev.Finish == FinishError {
			t.Fatalf("a healthy beam search ended with an error: %+v", ev)
		}
	}
	if tokens == 0 {
		t.Fatal("a healthy beam search made no token")
	}
}

// nanAdapter is an o_proj adapter holding NaN, as a checkpoint of diverged training could.
func nanAdapter(m *model.Model) *model.LoRA {
	out, in, _ := model.ModuleShape(&m.Config, "o_proj")
	const r = 2
	a := &model.LoRA{Name: "diverged", Rank: r, Alpha: 2, Scaling: 1, Targets: []string{"o_proj"}, Layers: make([]map[string]*model.LoRAPair, m.Config.NumLayers)}
	for l := range a.Layers {
		p := &model.LoRAPair{A: make([]float32, r*in), B: make([]float32, out*r), In: in, Out: out}
		for i := range p.A {
			p.A[i] = float32(math.NaN())
		}
		for i := range p.B {
			p.B[i] = 1
		}
		a.Layers[l] = map[string]*model.LoRAPair{"o_proj": p}
	}
	return a
}
