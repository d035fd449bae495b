package train

import (
	"context"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/trainingdata"
)

func tinyDir(t testing.TB, arch string, std float64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), arch)
	o := synth.Tiny(arch)
	o.Std = std
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

const capitals = `{"messages":[{"role":"user","content":"Capital of France?"},{"role":"assistant","content":"Paris."}]}
{"messages":[{"role":"user","content":"Capital of Japan?"},{"role":"assistant","content":"Tokyo."}]}
{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Capital of Peru?"},{"role":"assistant","content":"Lima."},{"role":"user","content":"And Chile?"},{"role":"assistant","content":"Santiago."}]}
{"messages":[{"role":"user","content":"Capital of Kenya?"},{"role":"assistant","content":"Nairobi."}]}
`

// TestPackKeepsExamplesApart: packed examples keep their segments, and an example's first
// token is not learned (nothing is before it in its segment).
func TestPackKeepsExamplesApart(t *testing.T) {
	_, _, _, xs := tinySFT(t, "llama")
	pk := Pack(xs, 1000)
	if len(pk) != 1 || len(pk[0].Seq.Segments) != 4 || pk[0].Train[pk[0].Seq.Segments[1]] {
		t.Fatalf("packing: %d sequences, segments %v", len(pk), pk[0].Seq.Segments)
	}
}

// TestSFTMemorises: LoRA SFT on a tiny model brings the loss on a small dataset from about
// ln(vocab) to below 0.1, and the saved checkpoint loads into the inference engine with the
// same logits.
func TestSFTMemorises(t *testing.T) {
	dir, m, _, xs := tinySFT(t, "llama")
	a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 8, Alpha: 16, Seed: 1})
	e, _ := NewTrainer(m, a)
	plan, err := PlanSFT(xs, SFTConfig{Epochs: 80, LearningRates: []float64{1e-2}, Schedule: "cosine", Warmup: 5, MaxSeqLen: 512})
	if err != nil {
		t.Fatal(err)
	}
	var first, last StepMetrics
	o, err := RunSFT(context.Background(), e, plan, nil, func(s StepMetrics) error {
		if s.Step == 1 {
			first = s
		}
		last = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loss %.3f -> %.4f over %d steps (ln V = %.2f)", first.Loss, last.Loss, last.Step, math.Log(float64(m.Config.VocabSize)))
	if first.Loss < 0.5*math.Log(float64(m.Config.VocabSize)) || last.Loss > 0.1 {
		t.Fatalf("loss %.3f -> %.4f", first.Loss, last.Loss)
	}
	if last.NumTrainableTokens == 0 || last.TokensPerSecond <= 0 || last.GradNorm <= 0 {
		t.Fatalf("metrics %+v", last)
	}
	// Checkpoint: PEFT layout, loaded by the inference engine, same logits as training.
	ck := filepath.Join(t.TempDir(), "step80")
	if err := SaveCheckpoint(ck, a, Checkpoint{BaseModel: dir, Optimizer: o}); err != nil {
		t.Fatal(err)
	}
	loaded, o2, err := LoadCheckpoint(ck, &m.Config)
	if err != nil || o2 == nil || o2.Step != o.Step {
		t.Fatalf("load: %v (optimizer %v)", err, o2)
	}
	seq := Seq{Tokens: xs[0].Tokens}
	want := e.Logprobs(seq, a)
	cache := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 64})
	logits, err := m.Forward([]model.Step{{Seq: cache.NewSequence(), Tokens: seq.Tokens, LogitsAt: allPositions(len(seq.Tokens)), Adapter: loaded}})
	if err != nil {
		t.Fatal(err)
	}
	for p := 0; p+1 < len(seq.Tokens); p++ {
		got := logSoftmax64(logits[0][p])[seq.Tokens[p+1]]
		if math.Abs(got-float64(want.Logp[p])) > 1e-3 {
			t.Fatalf("position %d: engine logp %.5f, training %.5f", p, got, want.Logp[p])
		}
	}
}

func allPositions(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

func logSoftmax64(x []float32) []float64 {
	mx := float64(x[0])
	for _, v := range x {
		mx = math.Max(mx, float64(v))
	}
	s := 0.0
	for _, v := range x {
		s += math.Exp(float64(v) - mx)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v) - mx - math.Log(s)
	}
	return out
}

// TestRunSFTFromEqualsUninterrupted: a run stopped after some steps (cancelled at a step
// boundary), its adapter and optimizer saved and loaded again, then continued with
// RunSFTFrom, ends with the adapter, optimizer state and step metrics of the run never
// stopped, bit for bit; the plan's fingerprint tells plans of other steps apart.
func TestRunSFTFromEqualsUninterrupted(t *testing.T) {
	_, m, _, xs := tinySFT(t, "llama")
	cfg := SFTConfig{Epochs: 3, BatchSize: 1, LearningRates: []float64{1e-2}, Schedule: "cosine", Warmup: 2,
		MaxSeqLen: 512, WeightDecay: 0.01, Shuffle: true, Seed: 9}
	plan := func(c SFTConfig) *SFTPlan {
		p, err := PlanSFT(xs, c)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	newAdapter := func() *model.LoRA { a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 3}); return a }
	// The run never stopped.
	a := newAdapter()
	e, _ := NewTrainer(m, a)
	var want []StepMetrics
	o, err := RunSFT(context.Background(), e, plan(cfg), nil, func(s StepMetrics) error { want = append(want, s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	// Stopped after step 5 as a shutdown stops it: the context ends during step 5.
	p := plan(cfg)
	b := newAdapter()
	e2, _ := NewTrainer(m, b)
	ctx, cancel := context.WithCancel(context.Background())
	var got []StepMetrics
	o2, err := RunSFTFrom(ctx, e2, p, nil, 0, func(s StepMetrics, _ *AdamW) error {
		got = append(got, s)
		if s.Step == 5 {
			cancel()
		}
		return nil
	})
	if err == nil || len(got) != 5 {
		t.Fatalf("stopped run: %v after %d steps", err, len(got))
	}
	ck := filepath.Join(t.TempDir(), "resume")
	if err := SaveCheckpoint(ck, b, Checkpoint{Optimizer: o2, Files: map[string][]byte{"resume.json": []byte("{}\n")}}); err != nil {
		t.Fatal(err)
	}
	b2, o3, err := LoadCheckpoint(ck, &m.Config)
	if err != nil {
		t.Fatal(err)
	}
	e3, _ := NewTrainer(m, b2)
	o4, err := RunSFTFrom(context.Background(), e3, plan(cfg), o3, 5, func(s StepMetrics, _ *AdamW) error { got = append(got, s); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d steps, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		g.TokensPerSecond, w.TokensPerSecond = 0, 0
		if g != w {
			t.Fatalf("step %d: %+v, uninterrupted %+v", i+1, g, w)
		}
	}
	pa, pb := params(a), params(b2)
	for i := range pa {
		for j := range pa[i] {
			if math.Float32bits(pa[i][j]) != math.Float32bits(pb[i][j]) {
				t.Fatalf("adapter tensor %d value %d: %g, uninterrupted %g", i, j, pb[i][j], pa[i][j])
			}
		}
	}
	if o4.Step != o.Step {
		t.Fatalf("optimizer step %d, uninterrupted %d", o4.Step, o.Step)
	}
	for i := range o.m {
		for j := range o.m[i] {
			if o.m[i][j] != o4.m[i][j] || o.v[i][j] != o4.v[i][j] {
				t.Fatalf("optimizer moments %d/%d differ", i, j)
			}
		}
	}
	// A plan of other steps has another fingerprint; the same plan, the same one.
	fp := plan(cfg).Fingerprint()
	if plan(cfg).Fingerprint() != fp {
		t.Fatal("the fingerprint of one plan changed")
	}
	for name, c := range map[string]SFTConfig{
		"seed":          func() SFTConfig { c := cfg; c.Seed = 10; return c }(),
		"learning rate": func() SFTConfig { c := cfg; c.LearningRates = []float64{2e-2}; return c }(),
		"epochs":        func() SFTConfig { c := cfg; c.Epochs = 2; return c }(),
		"max_seq_len":   func() SFTConfig { c := cfg; c.MaxSeqLen = 20; return c }(),
		"weight decay":  func() SFTConfig { c := cfg; c.WeightDecay = 0; return c }(),
	} {
		if plan(c).Fingerprint() == fp {
			t.Errorf("a plan with another %s has the same fingerprint", name)
		}
	}
	if _, err := RunSFTFrom(context.Background(), e3, plan(cfg), nil, len(want)+1, nil); err == nil {
		t.Error("a run starting after the plan's last step was not refused")
	}
}

// errAfter is a context whose Err reports it cancelled from its n-th call on.
type errAfter struct {
	context.Context
	calls, n int
}

func (c *errAfter) Err() error {
	if c.calls++; c.calls >= c.n {
		return context.Canceled
	}
	return nil
}

// TestRunSFTStopsWithinAStep: a shutdown in the middle of a step of several sequences stops
// the run before the step's next sequence; nothing of the step is applied, so the adapter is
// the one after the step before (and a run resumed from there equals the uninterrupted one).
func TestRunSFTStopsWithinAStep(t *testing.T) {
	_, m, _, xs := tinySFT(t, "llama")
	// Four examples per step, each its own sequence (max_seq_len 24 packs none together).
	cfg := SFTConfig{Epochs: 2, BatchSize: 4, LearningRates: []float64{1e-2}, MaxSeqLen: 24}
	plan, err := PlanSFT(xs, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Batches[1]) < 3 {
		t.Fatalf("step 2 has %d sequences", len(plan.Batches[1]))
	}
	newAdapter := func() *model.LoRA { a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 3}); return a }
	want := newAdapter()
	e, _ := NewTrainer(m, want)
	if _, err := RunSFT(context.Background(), e, &SFTPlan{Batches: plan.Batches[:1], cfg: plan.cfg}, nil, nil); err != nil {
		t.Fatal(err)
	}
	// Err is asked at the top of each step and before each sequence: call 1 + len(step 1) + 1
	// is the top of step 2, the next its first sequence; cancelled before its second.
	got := newAdapter()
	e2, _ := NewTrainer(m, got)
	steps := 0
	ctx := &errAfter{Context: context.Background(), n: 1 + len(plan.Batches[0]) + 3}
	_, err = RunSFTFrom(ctx, e2, plan, nil, 0, func(StepMetrics, *AdamW) error { steps++; return nil })
	if err == nil || steps != 1 {
		t.Fatalf("run: %v after %d steps", err, steps)
	}
	pw, pg := params(want), params(got)
	for i := range pw {
		for j := range pw[i] {
			if math.Float32bits(pw[i][j]) != math.Float32bits(pg[i][j]) {
				t.Fatalf("adapter tensor %d value %d: %g, after step 1 %g (the stopped step was applied)", i, j, pg[i][j], pw[i][j])
			}
		}
	}
}

// tinySFT loads a tiny model of arch (std 0.2), its chat tokenizer and the capitals examples.
func tinySFT(t *testing.T, arch string) (string, *model.Model, *trainingdata.ChatTokenizer, []trainingdata.Example) {
	t.Helper()
	dir := tinyDir(t, arch, 0.2)
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := trainingdata.LoadChat(dir)
	if err != nil {
		t.Fatal(err)
	}
	xs, err := trainingdata.ReadSFT(strings.NewReader(capitals), c, "all")
	if err != nil {
		t.Fatal(err)
	}
	return dir, m, c, xs
}
