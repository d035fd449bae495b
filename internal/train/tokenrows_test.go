package train

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/quant"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/trainingdata"
)

// tokenRowsModel is a tiny model of arch (tied or not, quantized to q at load unless F32).
func tokenRowsModel(t testing.TB, arch string, tied bool, q gguf.TensorType) *model.Model {
	t.Helper()
	dir := filepath.Join(t.TempDir(), arch)
	o := synth.Tiny(arch)
	o.Std, o.Tied = 0.2, tied
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, model.LoadOptions{Quantize: q})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// moveRows moves token rows away from the base's, so that every path that must read them
// (and not the base's) is seen to.
func moveRows(t *model.TokenRows, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 4))
	for i := range t.Rows {
		t.Rows[i] += float32(rng.NormFloat64() * 0.3)
	}
}

// TestTokenRowGradients checks the gradients of trainable token rows (tokens used as inputs,
// as targets and neither) and of the adapter's matrices beside them against central
// differences: tied and untied heads, Gemma 3's scaled embedding, Gemma 2's final
// soft-capping, the chunked head over several chunks (a quantized head: TestTokenRowsQuantHead).
func TestTokenRowGradients(t *testing.T) {
	for _, c := range []struct {
		name, arch string
		tied       bool
		q          gguf.TensorType
		chunk      int
	}{{"llama-untied", "llama", false, gguf.F32, 128}, {"llama-tied-chunks", "llama", true, gguf.F32, 4},
		{"gemma3", "gemma3", true, gguf.F32, 128}, {"gemma2", "gemma2", true, gguf.F32, 128}} {
		t.Run(c.name, func(t *testing.T) {
			m := tokenRowsModel(t, c.arch, c.tied, c.q)
			a, err := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 3})
			if err != nil {
				t.Fatal(err)
			}
			randomise(a, 5)
			rng := rand.New(rand.NewPCG(11, 11))
			s := Seq{Tokens: make([]int, 21), Segments: []int{0, 12}}
			w := make([]float32, len(s.Tokens))
			for i := range s.Tokens {
				s.Tokens[i] = rng.IntN(m.Config.VocabSize)
				w[i] = float32(rng.Float64())
			}
			// An input and target token twice, one only an input (the last), one in neither.
			s.Tokens[5], s.Tokens[16] = 7, 7
			unused := 3
			for slices.Contains(s.Tokens, unused) {
				unused++
			}
			ids := []int{7, s.Tokens[len(s.Tokens)-1], unused}
			if _, err := AddTokenRows(m, a, ids); err != nil {
				t.Fatal(err)
			}
			if c.tied != a.TiedTokens() {
				t.Fatalf("tied %v, the adapter's rows tied %v", c.tied, a.TiedTokens())
			}
			moveRows(a.EmbedTokens, 1)
			if !c.tied {
				moveRows(a.HeadTokens, 2)
			}
			e, err := NewTrainer(m, a)
			if err != nil {
				t.Fatal(err)
			}
			e.ChunkRows = c.chunk
			e.ForwardBackward(s, weightedNLL(w))
			type param struct {
				name string
				v, g []float32
			}
			ps := []param{{"embed rows", a.EmbedTokens.Rows, e.G.Embed}}
			if !c.tied {
				ps = append(ps, param{"head rows", a.HeadTokens.Rows, e.G.Head})
			}
			for _, mod := range []string{"q_proj", "down_proj"} {
				ps = append(ps, param{"layer 0 " + mod + ".B", a.Layers[0][mod].B, e.G.Layers[0][mod].B})
			}
			H := m.Config.HiddenSize
			for _, p := range ps {
				for k := range 8 {
					i := rng.IntN(len(p.v))
					if k < 3 && p.name != "layer 0 q_proj.B" && p.name != "layer 0 down_proj.B" {
						i = k*H + rng.IntN(H) // one element of each token's row
					}
					old := p.v[i]
					const h = 1e-2
					p.v[i] = old + h
					lp := lossOf(e, s, w)
					p.v[i] = old - h
					lm := lossOf(e, s, w)
					p.v[i] = old
					num := (lp - lm) / (2 * h)
					got := float64(p.g[i])
					if math.Abs(num-got) > 2e-3+0.03*math.Abs(num) {
						t.Errorf("%s[%d] (token %d): analytic %.6g, numeric %.6g", p.name, i, i/H, got, num)
					}
				}
			}
			// The unused token's embedding row gets no gradient.
			if !c.tied {
				for _, v := range e.G.Embed[2*H : 3*H] {
					if v != 0 {
						t.Fatalf("the embedding row of a token the sequence does not hold has gradient %v", v)
					}
				}
			}
		})
	}
}

// TestTokenRowsQuantHead: with a quantized LM head, the tiled head (headQuant: the rows put
// in its dequantized tiles) gives the statistics and gradients (token rows and adapter) of
// the chunked head (the base's product corrected for the rows), tied and untied.
func TestTokenRowsQuantHead(t *testing.T) {
	defer func(n int) { headTile, tiledQuantHead, quant.GEMMRows = n, true, -1 }(headTile)
	headTile, quant.GEMMRows = 7, 1 // products exact in the activations in both paths
	for _, tied := range []bool{true, false} {
		m := tokenRowsModel(t, "llama", tied, gguf.Q8_0)
		if m.LMHead.W.Q == nil {
			t.Fatal("the head is not quantized")
		}
		a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Seed: 3})
		randomise(a, 5)
		rng := rand.New(rand.NewPCG(2, 2))
		s := Seq{Tokens: make([]int, 23), Segments: []int{0, 13}}
		g := make([]float32, len(s.Tokens))
		for i := range s.Tokens {
			s.Tokens[i] = rng.IntN(m.Config.VocabSize)
			g[i] = -float32(rng.Float64())
		}
		if _, err := AddTokenRows(m, a, []int{s.Tokens[4], s.Tokens[9], 1}); err != nil {
			t.Fatal(err)
		}
		moveRows(a.EmbedTokens, 1)
		if !tied {
			moveRows(a.HeadTokens, 2)
		}
		e, _ := NewTrainer(m, a)
		e.ChunkRows = 5
		run := func(tiled bool) (TokenStats, [][]float32) {
			tiledQuantHead = tiled
			st := e.ForwardBackwardWeights(s, g)
			var gs [][]float32
			for _, x := range e.G.list() {
				gs = append(gs, slices.Clone(x))
			}
			e.G.Zero()
			return st, gs
		}
		st0, g0 := run(false)
		st1, g1 := run(true)
		for i := range s.Tokens {
			if d := math.Abs(float64(st1.Logp[i] - st0.Logp[i])); d > 1e-5 {
				t.Fatalf("tied %v position %d: logp %v tiled, %v chunked", tied, i, st1.Logp[i], st0.Logp[i])
			}
		}
		for k := range g0 {
			for j := range g0[k] {
				if d := math.Abs(float64(g1[k][j] - g0[k][j])); d > 1e-5+1e-4*math.Abs(float64(g0[k][j])) {
					t.Fatalf("tied %v gradient tensor %d of %d [%d]: %v tiled, %v chunked", tied, k, len(g0), j, g1[k][j], g0[k][j])
				}
			}
		}
	}
}

// TestTokenRowsTrainSaveServe: SFT trains the token rows of the turn's tokens beside the
// adapter (rows start as the base's, which changes nothing, and move), the checkpoint holds
// them in PEFT's layout (trainable_token_indices, token_adapter.trainable_tokens_delta) with
// their optimizer moments, and the inference engine serves them for the steps of that
// adapter only: another sequence in the same batch gets the base's rows. Tied (one set of
// rows) and untied (the embedding's and the head's).
func TestTokenRowsTrainSaveServe(t *testing.T) {
	for _, arch := range []string{"llama", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			dir, m, c, xs := tinySFT(t, arch)
			tied := m.TiedHead()
			eos, _ := c.Tok.EOS()
			end, ids := c.TurnTokens([]int{eos})
			if end < 0 || !slices.Contains(ids, end) || len(ids) < 2 {
				t.Fatalf("turn tokens: end %d, %v", end, ids)
			}
			a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 8, Alpha: 16, Seed: 1})
			e0, _ := NewTrainer(m, a)
			before := e0.Logprobs(Seq{Tokens: xs[0].Tokens}, a)
			if _, err := AddTokenRows(m, a, ids); err != nil {
				t.Fatal(err)
			}
			if added, _ := AddTokenRows(m, a, ids); added {
				t.Fatal("AddTokenRows added rows the adapter has")
			}
			initial := slices.Clone(a.EmbedTokens.Rows)
			e, _ := NewTrainer(m, a)
			same := e.Logprobs(Seq{Tokens: xs[0].Tokens}, a)
			for i := range same.Logp {
				if math.Abs(float64(same.Logp[i]-before.Logp[i])) > 1e-5 {
					t.Fatalf("position %d: the base's rows as token rows give logp %v, the base %v", i, same.Logp[i], before.Logp[i])
				}
			}
			plan, err := PlanSFT(xs, SFTConfig{Epochs: 4, LearningRates: []float64{1e-2}, MaxSeqLen: 512})
			if err != nil {
				t.Fatal(err)
			}
			o, err := RunSFT(context.Background(), e, plan, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Equal(initial, a.EmbedTokens.Rows) || o.TokenStep != o.Step {
				t.Fatalf("the token rows did not train (token steps %d of %d)", o.TokenStep, o.Step)
			}
			ck := filepath.Join(t.TempDir(), "step1")
			if err := SaveCheckpoint(ck, a, Checkpoint{BaseModel: dir, Optimizer: o}); err != nil {
				t.Fatal(err)
			}
			var cfg model.AdapterConfig
			raw, _ := os.ReadFile(filepath.Join(ck, "adapter_config.json"))
			if err := json.Unmarshal(raw, &cfg); err != nil {
				t.Fatal(err)
			}
			want := model.TokenIndices{"embed_tokens": ids}
			if !tied {
				want["lm_head"] = ids
			}
			if !reflect.DeepEqual(cfg.TrainableTokenIndices, want) {
				t.Fatalf("trainable_token_indices %v, want %v", cfg.TrainableTokenIndices, want)
			}
			f, err := safetensors.Open(filepath.Join(ck, "adapter_model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			te, okE := f.Tensor(model.PeftEmbedTokens)
			_, okH := f.Tensor(model.PeftHeadTokens)
			if !okE || okH == tied || !slices.Equal(te.Shape, []int{len(ids), m.Config.HiddenSize}) {
				t.Fatalf("tensors: %v (embedding's %v, head's %v)", f.Names(), okE, okH)
			}
			f.Close()
			loaded, o2, err := LoadCheckpoint(ck, &m.Config)
			if err != nil {
				t.Fatal(err)
			}
			if loaded.TiedTokens() != tied || !slices.Equal(loaded.EmbedTokens.Rows, a.EmbedTokens.Rows) || !slices.Equal(loaded.HeadTokens.Rows, a.HeadTokens.Rows) ||
				o2.TokenStep != o.TokenStep || !reflect.DeepEqual(o2.tm, o.tm) || !reflect.DeepEqual(o2.tv, o.tv) {
				t.Fatal("the checkpoint does not give back the token rows and their moments")
			}
			// Served: the adapter's rows for its steps, the base's for the others.
			seq := Seq{Tokens: xs[0].Tokens}
			wantA := e.Logprobs(seq, a)
			wantBase := e.Logprobs(seq, nil)
			cache := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 128})
			at := allPositions(len(seq.Tokens))
			logits, err := m.Forward([]model.Step{{Seq: cache.NewSequence(), Tokens: seq.Tokens, LogitsAt: at, Adapter: loaded},
				{Seq: cache.NewSequence(), Tokens: seq.Tokens, LogitsAt: at}})
			if err != nil {
				t.Fatal(err)
			}
			differ := 0
			for p := 0; p+1 < len(seq.Tokens); p++ {
				next := seq.Tokens[p+1]
				got, base := logSoftmax64(logits[0][p])[next], logSoftmax64(logits[1][p])[next]
				if math.Abs(got-float64(wantA.Logp[p])) > 1e-4 || math.Abs(base-float64(wantBase.Logp[p])) > 1e-4 {
					t.Fatalf("position %d: engine logp %.5f with the adapter, %.5f without; training %.5f, %.5f", p, got, base, wantA.Logp[p], wantBase.Logp[p])
				}
				if slices.Contains(ids, next) && math.Abs(got-base) > 1e-2 {
					differ++
				}
			}
			if differ == 0 {
				t.Fatal("no turn token's log-probability changed")
			}
		})
	}
}

// TestFrozenTokenRows: a job with trainable_tokens off leaves an adapter's token rows as
// they are (and their moments), training the rest.
func TestFrozenTokenRows(t *testing.T) {
	_, m, c, xs := tinySFT(t, "llama")
	a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 8, Alpha: 16, Seed: 1})
	_, ids := c.TurnTokens(nil)
	if _, err := AddTokenRows(m, a, ids); err != nil {
		t.Fatal(err)
	}
	rows := slices.Clone(a.HeadTokens.Rows)
	b := slices.Clone(a.Layers[0]["q_proj"].B)
	e, _ := NewTrainer(m, a)
	e.FrozenTokens = true
	plan, _ := PlanSFT(xs, SFTConfig{Epochs: 2, LearningRates: []float64{1e-2}, MaxSeqLen: 512})
	o, err := RunSFT(context.Background(), e, plan, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rows, a.HeadTokens.Rows) || o.TokenStep != 0 || o.tm != nil {
		t.Fatal("frozen token rows changed")
	}
	if slices.Equal(b, a.Layers[0]["q_proj"].B) {
		t.Fatal("the adapter did not train")
	}
}

// TestRLTrainsTokenRows: an RL step trains the adapter's token rows with the rest (their
// first update of their own AdamW steps); frozen, it leaves them as they are.
func TestRLTrainsTokenRows(t *testing.T) {
	dir := tinyDir(t, "llama", 0.2)
	c, err := trainingdata.LoadChat(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := model.Load(dir, model.LoadOptions{})
	end, ids := c.TurnTokens(nil)
	user := json.RawMessage(`{"role":"user","content":"Say something"}`)
	choice := func(toks []int) json.RawMessage {
		var content []map[string]any
		for _, id := range toks {
			content = append(content, map[string]any{"token": fmt.Sprintf("token_id:%d", id), "logprob": -1.0, "bytes": []int{}})
		}
		b, _ := json.Marshal(map[string]any{"index": 0, "finish_reason": "stop", "token_ids": toks,
			"message": map[string]any{"role": "assistant", "content": c.Tok.Decode(toks, true)}, "logprobs": map[string]any{"content": content}})
		return b
	}
	g := trainingdata.TrajectoryGroup{Trajectories: []trainingdata.Trajectory{
		{MessagesAndChoices: []json.RawMessage{user, choice([]int{100, 101, end})}, Reward: 1},
		{MessagesAndChoices: []json.RawMessage{user, choice([]int{102, 103, end})}, Reward: 0},
	}}
	for _, frozen := range []bool{false, true} {
		a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Seed: 2})
		if _, err := AddTokenRows(m, a, ids); err != nil {
			t.Fatal(err)
		}
		before := slices.Clone(a.HeadTokens.Rows)
		e, _ := NewTrainer(m, a)
		e.FrozenTokens = frozen
		_, o, err := RLStep(context.Background(), e, c, []trainingdata.TrajectoryGroup{g}, RLConfig{LearningRate: 1e-2, ScaleRewards: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if moved := !slices.Equal(before, a.HeadTokens.Rows); moved == frozen || (o.TokenStep == 1) == frozen {
			t.Fatalf("frozen %v: the rows moved %v, token steps %d", frozen, moved, o.TokenStep)
		}
	}
}

// TestTurnEndProbOnePass: the probes run packed in one pass give the geometric mean of the
// end-of-turn probabilities each probe gives alone.
func TestTurnEndProbOnePass(t *testing.T) {
	for _, arch := range []string{"llama", "gemma3"} {
		t.Run(arch, func(t *testing.T) {
			_, m, c, _ := tinySFT(t, arch)
			eos, _ := c.Tok.EOS()
			end, _ := c.TurnTokens([]int{eos})
			a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 8, Alpha: 16, Seed: 1})
			e, _ := NewTrainer(m, a)
			got, err := TurnEndProb(e, c, a, end)
			if err != nil {
				t.Fatal(err)
			}
			sum, n := 0.0, 0
			for _, qa := range turnEndProbes {
				msgs, _ := json.Marshal([]map[string]string{{"role": "user", "content": qa[0]}, {"role": "assistant", "content": qa[1]}})
				x, err := c.Tokenize(msgs, nil, "all")
				if err != nil {
					t.Fatal(err)
				}
				for i := 1; i < len(x.Tokens); i++ {
					if x.Train[i] && x.Tokens[i] == end {
						st := e.Logprobs(Seq{Tokens: x.Tokens[:i+1]}, a)
						sum += float64(st.Logp[i-1])
						n++
						break
					}
				}
			}
			if n != len(turnEndProbes) {
				t.Fatalf("%d of %d probes end with token %d", n, len(turnEndProbes), end)
			}
			if want := math.Exp(sum / float64(n)); math.Abs(got-want) > 1e-5*want {
				t.Fatalf("TurnEndProb %v, probes one by one %v", got, want)
			}
		})
	}
}
