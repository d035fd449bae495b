package train

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/trainingdata"
)

// adamwGolden is testdata/adamw.json, written by scripts/train-goldens/adamw.py with
// torch.optim.AdamW and torch.nn.utils.clip_grad_norm_.
type adamwGolden struct {
	WeightDecay float64     `json:"weight_decay"`
	MaxNorm     float64     `json:"max_norm"`
	Init        [][]float64 `json:"init"`
	Steps       []struct {
		LR     float64     `json:"lr"`
		Grads  [][]float64 `json:"grads"`
		Norm   float64     `json:"norm"`
		Params [][]float64 `json:"params"`
	} `json:"steps"`
}

func f32s(x []float64) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = float32(v)
	}
	return out
}

// twoTensors is an adapter whose parameters (in params order) are the golden's two tensors.
func twoTensors(a0, b0 []float32) (*model.LoRA, *Grads) {
	a := &model.LoRA{Layers: []map[string]*model.LoRAPair{{"q_proj": {A: slices.Clone(a0), B: slices.Clone(b0)}}}}
	return a, NewGrads(a)
}

func TestAdamWMatchesPyTorch(t *testing.T) {
	b, err := os.ReadFile("testdata/adamw.json")
	if err != nil {
		t.Fatal(err)
	}
	var g adamwGolden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	a, gr := twoTensors(f32s(g.Init[0]), f32s(g.Init[1]))
	o := NewAdamW(g.WeightDecay)
	for i, st := range g.Steps {
		copy(gr.Layers[0]["q_proj"].A, f32s(st.Grads[0]))
		copy(gr.Layers[0]["q_proj"].B, f32s(st.Grads[1]))
		if n := gr.Clip(g.MaxNorm); math.Abs(n-st.Norm) > 1e-5 {
			t.Fatalf("step %d: norm %v, PyTorch %v", i, n, st.Norm)
		}
		o.Update(a, gr, st.LR)
		for k, got := range params(a) {
			for j, v := range got {
				if d := math.Abs(float64(v) - st.Params[k][j]); d > 2e-6 {
					t.Fatalf("step %d tensor %d[%d]: %v, PyTorch %v", i, k, j, v, st.Params[k][j])
				}
			}
		}
	}
}

// TestAdamWStateContinues: saving and loading the optimizer between steps gives the same
// parameters as an uninterrupted run.
func TestAdamWStateContinues(t *testing.T) {
	init0, init1 := []float32{0.5, -1, 2, 0.25}, []float32{1, -0.5}
	grad := func(step int, g *Grads) {
		for k, t := range g.list() {
			for j := range t {
				t[j] = float32(math.Sin(float64(step*7 + k*3 + j)))
			}
		}
	}
	run := func(save bool) [][]float32 {
		a, g := twoTensors(init0, init1)
		o := NewAdamW(0.01)
		for s := 0; s < 4; s++ {
			if save && s == 2 {
				dir := t.TempDir()
				if err := o.Save(dir); err != nil {
					t.Fatal(err)
				}
				var err error
				if o, err = LoadAdamW(dir, a); err != nil {
					t.Fatal(err)
				}
			}
			grad(s, g)
			o.Update(a, g, 0.1)
		}
		return params(a)
	}
	want, got := run(false), run(true)
	for k := range want {
		if !slices.Equal(want[k], got[k]) {
			t.Fatalf("tensor %d: %v after reload, %v without", k, got[k], want[k])
		}
	}
	// An adapter of another shape is refused.
	dir := t.TempDir()
	a, g := twoTensors(init0, init1)
	o := NewAdamW(0)
	o.Update(a, g, 0.1)
	if err := o.Save(dir); err != nil {
		t.Fatal(err)
	}
	other, _ := twoTensors(init0, init1[:1])
	if _, err := LoadAdamW(dir, other); err == nil {
		t.Fatal("optimizer state of another shape loaded")
	}
}

func TestSchedules(t *testing.T) {
	near := func(got, want float64) bool { return math.Abs(got-want) < 1e-12 }
	c := Schedule{Kind: "constant", Peak: 1, Warmup: 2, Total: 10}
	if !near(c.At(0), 0.5) || !near(c.At(1), 1) || !near(c.At(9), 1) {
		t.Fatalf("constant with warm-up: %v %v %v", c.At(0), c.At(1), c.At(9))
	}
	l := Schedule{Kind: "linear", Peak: 2, Warmup: 2, Total: 10}
	// After warm-up: 2·(1 − (s−2)/8).
	for s, want := range map[int]float64{2: 2, 6: 1, 9: 0.25, 12: 0} {
		if !near(l.At(s), want) {
			t.Errorf("linear At(%d) = %v, want %v", s, l.At(s), want)
		}
	}
	cs := Schedule{Kind: "cosine", Peak: 1, Total: 8, MinRatio: 0.1}
	for s, want := range map[int]float64{0: 1, 4: 0.55, 8: 0.1, 2: 0.1 + 0.9*0.5*(1+math.Cos(math.Pi/4))} {
		if !near(cs.At(s), want) {
			t.Errorf("cosine At(%d) = %v, want %v", s, cs.At(s), want)
		}
	}
	if ValidSchedule("step") || !ValidSchedule("cosine") || !ValidSchedule("") {
		t.Fatal("ValidSchedule")
	}
}

// TestAccumulationEqualsPacking: gradients accumulated over two sequences equal those of the
// two packed into one sequence (segments keep them apart), and both are what the per-sequence
// gradients add up to.
func TestAccumulationEqualsPacking(t *testing.T) {
	m := tinyModel(t, "qwen2", 0.2, "f32")
	a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Seed: 3})
	randomise(a, 4)
	e, _ := NewTrainer(m, a)
	x := []int{5, 17, 3, 99, 41, 8, 23}
	y := []int{64, 2, 77, 19, 5}
	ones := func(n int) func(TokenStats) []float32 {
		return func(TokenStats) []float32 {
			g := make([]float32, n)
			for i := range g {
				g[i] = -1
			}
			return g
		}
	}
	e.G.Zero()
	e.ForwardBackward(Seq{Tokens: x}, ones(len(x)))
	e.ForwardBackward(Seq{Tokens: y}, ones(len(y)))
	acc := e.G.list()
	accCopy := make([][]float32, len(acc))
	for i := range acc {
		accCopy[i] = slices.Clone(acc[i])
	}
	e.G.Zero()
	packed := Seq{Tokens: append(slices.Clone(x), y...), Segments: []int{0, len(x)}}
	e.ForwardBackward(packed, ones(len(packed.Tokens)))
	maxAbs, maxDiff := 0.0, 0.0
	for i, p := range e.G.list() {
		for j, v := range p {
			maxAbs = math.Max(maxAbs, math.Abs(float64(accCopy[i][j])))
			maxDiff = math.Max(maxDiff, math.Abs(float64(v-accCopy[i][j])))
		}
	}
	if maxAbs == 0 || maxDiff > 1e-4*maxAbs {
		t.Fatalf("packed vs accumulated: max difference %g (max gradient %g)", maxDiff, maxAbs)
	}
}

// TestSFTDeterministic: the same data, configuration and seeds give bit-identical adapters
// (shuffling and adapter dropout included); another seed gives another result.
func TestSFTDeterministic(t *testing.T) {
	_, m, _, xs := tinySFT(t, "llama")
	run := func(seed uint64) [][]float32 {
		a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Seed: seed})
		e, _ := NewTrainer(m, a)
		e.Dropout, e.Seed = 0.1, seed
		plan, err := PlanSFT(xs, SFTConfig{Epochs: 2, BatchSize: 2, Shuffle: true, Seed: seed, LearningRates: []float64{1e-2}, MaxSeqLen: 256})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := RunSFT(context.Background(), e, plan, nil, nil); err != nil {
			t.Fatal(err)
		}
		return params(a)
	}
	p1, p2, p3 := run(1), run(1), run(2)
	same := func(x, y [][]float32) bool {
		for i := range x {
			if !slices.Equal(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	if !same(p1, p2) {
		t.Fatal("two runs with the same seed differ")
	}
	if same(p1, p3) {
		t.Fatal("runs with different seeds are identical")
	}
}

func TestPlanSFT(t *testing.T) {
	ex := func(n int) trainingdata.Example {
		x := trainingdata.Example{Tokens: make([]int, n), Train: make([]bool, n)}
		for i := range x.Train {
			x.Train[i] = i >= n/2
		}
		return x
	}
	xs := []trainingdata.Example{ex(10), ex(20), ex(30), ex(40), ex(50)}
	// auto: n/8 examples a step, at least 1 and at most 8 (AutoBatchSize).
	p, err := PlanSFT(xs, SFTConfig{MaxSeqLen: 60})
	if err != nil {
		t.Fatal(err)
	}
	if p.Steps() != 5 {
		t.Fatalf("auto: %d steps for 5 examples, want 5", p.Steps())
	}
	for n, want := range map[int]int{0: 1, 7: 1, 16: 2, 40: 5, 64: 8, 10000: 8} {
		if got := AutoBatchSize(n); got != want {
			t.Errorf("AutoBatchSize(%d) = %d, want %d", n, got, want)
		}
	}
	// Examples longer than MaxSeqLen are cut; a batch packs into sequences of at most
	// MaxSeqLen tokens.
	p, _ = PlanSFT(append(xs, ex(70)), SFTConfig{BatchSize: 6, MaxSeqLen: 60})
	var sizes []int
	for _, pk := range p.Batches[0] {
		sizes = append(sizes, len(pk.Seq.Tokens))
	}
	if !slices.Equal(sizes, []int{60, 40, 50, 60}) {
		t.Fatalf("packed sequences of %v tokens", sizes)
	}
	// A number: that many examples per step, over epochs.
	p, _ = PlanSFT(xs, SFTConfig{BatchSize: 2, Epochs: 2, MaxSeqLen: 1000})
	if p.Steps() != 6 {
		t.Fatalf("%d steps, want 6", p.Steps())
	}
	// A list of learning rates: one per step, used as given.
	lrs := []float64{1, 2, 3, 4, 5, 6}
	p, err = PlanSFT(xs, SFTConfig{BatchSize: 2, Epochs: 2, LearningRates: lrs, Schedule: "cosine"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range lrs {
		if p.lr(i) != want {
			t.Fatalf("lr(%d) = %v", i, p.lr(i))
		}
	}
	if _, err := PlanSFT(xs, SFTConfig{BatchSize: 2, LearningRates: []float64{1, 2}}); err == nil || !strings.Contains(err.Error(), "3 batches") {
		t.Fatalf("mismatched learning-rate list: %v", err)
	}
	if _, err := PlanSFT(xs, SFTConfig{Schedule: "step"}); err == nil {
		t.Fatal("unknown schedule accepted")
	}
	// A long example is cut to MaxSeqLen.
	p, _ = PlanSFT([]trainingdata.Example{ex(100)}, SFTConfig{MaxSeqLen: 64})
	if n := len(p.Batches[0][0].Seq.Tokens); n != 64 {
		t.Fatalf("long example packed to %d tokens", n)
	}
}

// BenchmarkAdamW: one update of a rank-16 adapter on all seven modules of a SmolLM2-135M
// shape (210 tensors, 4.9M parameters), reporting the bytes read and written per second
// (parameters, gradients and both moments read; parameters and moments written).
func BenchmarkAdamW(b *testing.B) {
	const tensors, size = 210, 23300
	mk := func() [][]float32 {
		x := make([][]float32, tensors)
		for i := range x {
			x[i] = make([]float32, size)
			for j := range x[i] {
				x[i][j] = 0.001 * float32(j%7)
			}
		}
		return x
	}
	p, g, m, v := mk(), mk(), mk(), mk()
	o := NewAdamW(0.01)
	for i := 0; b.Loop(); i++ {
		o.step(p, g, m, v, i+1, 1e-4, 0.01)
	}
	b.ReportMetric(float64(tensors*size*4*7)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
