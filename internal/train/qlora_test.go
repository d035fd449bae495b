package train

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/quant"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/trainingdata"
)

// qloraArchs are the architectures Hone trains.
var qloraArchs = []string{"llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3", "phi3", "qwen3moe"}

// qloraDir writes a small model of arch whose matrices are 256 wide, so that quantizing to
// Q4_K (super-blocks of 256) keeps Q4_K instead of falling back to Q5_0.
func qloraDir(t *testing.T, arch string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), arch)
	o := synth.Tiny(arch)
	o.Hidden, o.Intermediate, o.Std = 256, 256, 0.1
	o.Vocab = 4096 // an embedding and head of 4 MB in f32: what a dequantized copy would take
	if arch == "qwen3moe" {
		o.MoEIntermediate = 256
	}
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

// quantizedMatrices checks that every matrix of m (embedding, projections, experts, head)
// is held quantized, and returns the f32 bytes the largest of them would take dequantized.
func quantizedMatrices(t *testing.T, m *model.Model, want gguf.TensorType) int64 {
	t.Helper()
	largest := int64(0)
	check := func(name string, w *model.Weight) {
		if w.Q == nil {
			t.Fatalf("%s is not quantized (F32 %v, Half %v)", name, w.F32 != nil, w.Half != nil)
		}
		if w.Cols%256 == 0 && w.Q.Type != want {
			t.Fatalf("%s is %s, want %s", name, w.Q.Type, want)
		}
		largest = max(largest, int64(w.Rows)*int64(w.Cols)*4)
	}
	check("embed", &m.Embed)
	check("lm_head", &m.LMHead.W)
	for i := range m.Layers {
		L := &m.Layers[i]
		for _, l := range []struct {
			n string
			l *model.Linear
		}{{"q", &L.Q}, {"k", &L.K}, {"v", &L.V}, {"o", &L.O}} {
			check(fmt.Sprintf("layer %d %s", i, l.n), &l.l.W)
		}
		if L.MoE != nil {
			for j := range L.MoE.Experts {
				x := &L.MoE.Experts[j]
				check(fmt.Sprintf("layer %d expert %d gate", i, j), &x.Gate.W)
				check(fmt.Sprintf("layer %d expert %d up", i, j), &x.Up.W)
				check(fmt.Sprintf("layer %d expert %d down", i, j), &x.Down.W)
			}
			continue
		}
		check(fmt.Sprintf("layer %d gate", i), &L.Gate.W)
		check(fmt.Sprintf("layer %d up", i), &L.Up.W)
		check(fmt.Sprintf("layer %d down", i), &L.Down.W)
	}
	return largest
}

// seqLoss is the mean negative log-likelihood of the trained tokens of pk under adapter a.
func seqLoss(e *Trainer, pk Packed, a *model.LoRA) float64 {
	st := e.Logprobs(pk.Seq, a)
	l, n := 0.0, 0
	for i := 1; i < len(pk.Train); i++ {
		if pk.Train[i] && pk.Seq.HasTarget(i-1) {
			l -= float64(st.Logp[i-1])
			n++
		}
	}
	return l / float64(max(n, 1))
}

// QLoRA SFT on every architecture Hone trains, on the base quantized at load to Q8_0 and to
// Q4_K (and, on Llama, to every other type --quantize serves): every matrix stays quantized (embedding and head included); a training pass after
// the first allocates less than one dequantized copy of the largest matrix would take (so
// no pass materialises dequantized weights; the backward products go by quant.MatMulAcc's
// small tiles); the loss goes down; and the checkpoint is a PEFT adapter that loads on the
// unquantized base, where it lowers the loss of the trained sequence as it did on the
// quantized one.
func TestQLoRASFT(t *testing.T) {
	for _, arch := range qloraArchs {
		dir := qloraDir(t, arch)
		types := []gguf.TensorType{gguf.Q8_0, gguf.Q4_K}
		if arch == "llama" { // the other types --quantize serves, on one architecture
			types = append(types, gguf.Q4_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.Q5_K, gguf.Q6_K)
		}
		for _, q := range types {
			t.Run(arch+"/"+q.String(), func(t *testing.T) {
				m, err := model.Load(dir, model.LoadOptions{Quantize: q})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				largest := quantizedMatrices(t, m, q)
				c, err := trainingdata.LoadChat(dir)
				if err != nil {
					t.Fatal(err)
				}
				xs, err := trainingdata.ReadSFT(strings.NewReader(capitals), c, "all")
				if err != nil {
					t.Fatal(err)
				}
				a, err := NewLoRA(&m.Config, LoRAConfig{Rank: 8, Alpha: 16, Seed: 1})
				if err != nil {
					t.Fatal(err)
				}
				e, err := NewTrainer(m, a)
				if err != nil {
					t.Fatal(err)
				}
				plan, err := PlanSFT(xs, SFTConfig{Epochs: 6, LearningRates: []float64{1e-2}, Schedule: "constant", MaxSeqLen: 512})
				if err != nil {
					t.Fatal(err)
				}
				pk := plan.Batches[0][0]
				before := seqLoss(e, pk, a)

				// One pass to size the arena, then measure what a second one allocates.
				g := make([]float32, len(pk.Seq.Tokens))
				for i := 1; i < len(g); i++ {
					if pk.Train[i] {
						g[i-1] = -1
					}
				}
				// No collection meanwhile: pooled tiles stay pooled, so the count is steady.
				defer debug.SetGCPercent(debug.SetGCPercent(-1))
				e.ForwardBackwardWeights(pk.Seq, g)
				var m0, m1 runtime.MemStats
				runtime.ReadMemStats(&m0)
				e.ForwardBackwardWeights(pk.Seq, g)
				runtime.ReadMemStats(&m1)
				alloc := int64(m1.TotalAlloc - m0.TotalAlloc)
				t.Logf("a training pass allocated %d bytes; the largest matrix dequantized is %d", alloc, largest)
				if alloc >= largest && !raceEnabled {
					t.Fatalf("a training pass allocated %d bytes, as much as the largest matrix dequantized (%d)", alloc, largest)
				}
				debug.SetGCPercent(100)
				e.G.Zero()

				var losses []float64
				if _, err := RunSFT(context.Background(), e, plan, nil, func(s StepMetrics) error {
					losses = append(losses, s.Loss)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				after := seqLoss(e, pk, a)
				if !(losses[len(losses)-1] < losses[0]) || !(after < before) {
					t.Fatalf("losses %.3f, sequence loss %.4f -> %.4f: training on the %s base did not lower the loss", losses, before, after, q)
				}

				ck := filepath.Join(t.TempDir(), "ck")
				if err := SaveCheckpoint(ck, a, Checkpoint{BaseModel: dir}); err != nil {
					t.Fatal(err)
				}
				full, err := model.Load(dir, model.LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				defer full.Close()
				back, err := model.LoadLoRA(ck, &full.Config)
				if err != nil {
					t.Fatal(err)
				}
				ef, err := NewTrainer(full, back)
				if err != nil {
					t.Fatal(err)
				}
				fb, fa := seqLoss(ef, pk, nil), seqLoss(ef, pk, back)
				t.Logf("sequence loss on the %s base %.4f -> %.4f; the adapter on the unquantized base %.4f -> %.4f", q, before, after, fb, fa)
				if !(fa < fb-0.5*(before-after)) {
					t.Fatalf("on the unquantized base the adapter takes the loss %.4f -> %.4f, against %.4f -> %.4f where it was trained", fb, fa, before, after)
				}
			})
		}
	}
}

// RL steps (RLStep, as a training job runs it) on a Q8_0 and a Q4_K base (and, for
// reference, the unquantized one): rewarded tokens become more likely, and the checkpoint,
// loaded on the unquantized base, makes them more likely there too.
func TestQLoRARLStep(t *testing.T) {
	dir := qloraDir(t, "qwen2")
	c, err := trainingdata.LoadChat(dir)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": "Say one word."}})
	text, err := c.Template.Render(chattemplateInput(msgs, c))
	if err != nil {
		t.Fatal(err)
	}
	prompt := c.Tok.Encode(text, false)
	good, bad := []int{65, 66, 67, 68}, []int{70, 71, 72, 73}
	logp := func(e *Trainer, a *model.LoRA, tok int) float32 {
		return e.Logprobs(Seq{Tokens: append(append([]int(nil), prompt...), tok)}, a).Logp[len(prompt)-1]
	}
	// meanLogp is the mean log-probability of the rewarded tokens after the prompt.
	meanLogp := func(e *Trainer, a *model.LoRA) float64 {
		s := 0.0
		for _, tok := range good {
			s += float64(logp(e, a, tok))
		}
		return s / float64(len(good))
	}
	for _, q := range []gguf.TensorType{gguf.F32, gguf.Q8_0, gguf.Q4_K} {
		t.Run(q.String(), func(t *testing.T) {
			m, err := model.Load(dir, model.LoadOptions{Quantize: q})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if q != gguf.F32 {
				quantizedMatrices(t, m, q)
			}
			a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 8, Alpha: 16, Seed: 2})
			e, _ := NewTrainer(m, a)
			before := meanLogp(e, a)
			var o *AdamW
			for step := 0; step < 4; step++ {
				var g trainingdata.TrajectoryGroup
				for i := range good {
					for _, x := range []struct {
						tok int
						r   float64
					}{{good[i], 1}, {bad[i], 0}} {
						g.Trajectories = append(g.Trajectories, trainingdata.Trajectory{Reward: x.r, MessagesAndChoices: []json.RawMessage{msgs[1 : len(msgs)-1],
							choiceJSON(c, []int{x.tok}, []float32{logp(e, a, x.tok)})}})
					}
				}
				met, o2, err := RLStep(context.Background(), e, c, []trainingdata.TrajectoryGroup{g}, RLConfig{LearningRate: 5e-3}, o)
				if err != nil && !errors.Is(err, ErrNothingToTrain) {
					t.Fatal(err)
				}
				o = o2
				t.Logf("step %d loss %.4f trajectories %d logp %.3f", step, met.Loss, met.NumTrajectories, meanLogp(e, a))
				if math.IsNaN(met.Loss) {
					t.Fatalf("step %d: loss NaN", step)
				}
			}
			after := meanLogp(e, a)
			ck := filepath.Join(t.TempDir(), "ck")
			if err := SaveCheckpoint(ck, a, Checkpoint{BaseModel: dir, Optimizer: o}); err != nil {
				t.Fatal(err)
			}
			full, err := model.Load(dir, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer full.Close()
			back, _, err := LoadCheckpoint(ck, &full.Config)
			if err != nil {
				t.Fatal(err)
			}
			ef, _ := NewTrainer(full, back)
			fb, fa := meanLogp(ef, nil), meanLogp(ef, back)
			t.Logf("rewarded tokens' mean logprob on the %s base %.3f -> %.3f; the checkpoint on the unquantized base %.3f -> %.3f", q, before, after, fb, fa)
			if !(after > before+0.5) || !(fa > fb+0.5) {
				t.Fatalf("rewarded tokens' logprob %.3f -> %.3f on the %s base, %.3f -> %.3f with the checkpoint on the unquantized one", before, after, q, fb, fa)
			}
		})
	}
}

// The tiled head of a quantized LM head (headQuant: the vocabulary a tile at a time, an
// online log-sum-exp) gives the statistics and gradients of the chunked head on the same
// quantized weights, through both head paths (coefficients after the statistics, and known
// beforehand), with Seq.Need, and with Gemma 2's final soft-capping; tiles of 7 rows make
// the running maximum move many times and leave a partial last tile.
func TestQuantHeadPathsAgree(t *testing.T) {
	defer func(n int) { headTile, tiledQuantHead, quant.GEMMRows = n, true, -1 }(headTile)
	// The chunked head's products by dequantized tiles too (exact in the activations, as the
	// tiled head's are), not on 8-bit activations.
	headTile, quant.GEMMRows = 7, 1
	for _, arch := range []string{"llama", "gemma2"} {
		t.Run(arch, func(t *testing.T) {
			dir := tinyDir(t, arch, 0.2)
			m, err := model.Load(dir, model.LoadOptions{Quantize: gguf.Q8_0})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.LMHead.W.Q == nil {
				t.Fatal("the head is not quantized")
			}
			a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Seed: 3})
			randomise(a, 5)
			e, _ := NewTrainer(m, a)
			e.ChunkRows = 5
			rng := rand.New(rand.NewPCG(2, 2))
			s := Seq{Tokens: make([]int, 23), Segments: []int{0, 13}}
			w := make([]float32, len(s.Tokens))
			need := make([]bool, len(s.Tokens))
			for i := range s.Tokens {
				s.Tokens[i] = rng.IntN(m.Config.VocabSize)
				if i%3 != 0 {
					w[i], need[i] = float32(rng.Float64()), true
				}
			}
			g := make([]float32, len(w))
			for i, v := range w {
				g[i] = -v
			}
			sn := s
			sn.Need = need
			run := func(tiled bool) ([]TokenStats, [][]float32) {
				tiledQuantHead = tiled
				var sts []TokenStats
				var gs [][]float32
				for _, f := range []func() TokenStats{
					func() TokenStats { return e.ForwardBackward(s, weightedNLL(w)) },
					func() TokenStats { return e.ForwardBackwardWeights(s, g) },
					func() TokenStats { return e.ForwardBackward(sn, weightedNLL(w)) },
				} {
					sts = append(sts, f())
					for _, x := range e.G.list() {
						gs = append(gs, slices.Clone(x))
					}
					e.G.Zero()
				}
				return sts, gs
			}
			st0, g0 := run(false)
			st1, g1 := run(true)
			for k := range st0 {
				for i := range s.Tokens {
					if d, de := math.Abs(float64(st1[k].Logp[i]-st0[k].Logp[i])), math.Abs(float64(st1[k].Entropy[i]-st0[k].Entropy[i])); d > 1e-5 || de > 1e-4 {
						t.Fatalf("pass %d position %d: logp %v tiled, %v chunked; entropy %v, %v", k, i, st1[k].Logp[i], st0[k].Logp[i], st1[k].Entropy[i], st0[k].Entropy[i])
					}
				}
			}
			for k := range g0 {
				for j := range g0[k] {
					if d := math.Abs(float64(g1[k][j] - g0[k][j])); d > 1e-5+1e-4*math.Abs(float64(g0[k][j])) {
						t.Fatalf("gradient tensor %d[%d]: %v tiled, %v chunked", k, j, g1[k][j], g0[k][j])
					}
				}
			}
		})
	}
}
