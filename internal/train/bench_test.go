package train

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/honeai/hone/internal/cputime"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// benchModels holds the models loaded by benchModel: one per preset and dtype per process,
// so that the benchmark's runs (b.N = 1, then the requested count) share it and the peak RSS
// is that of one model.
var benchModels = map[string]*model.Model{}

// benchModelQ writes (once per process) a model of the given preset and dtype into the
// temporary directory, or uses HONE_BENCH_MODELS/<name>-<dtype> when set, and loads it once,
// with the matrices quantized to q at load (gguf.F32: none), as a training job's base_model
// with "quantize" is.
func benchModelQ(b *testing.B, name, dtype string, q gguf.TensorType) *model.Model {
	b.Helper()
	key := name + "-" + dtype + "-" + q.String()
	if m, ok := benchModels[key]; ok {
		return m
	}
	dir := filepath.Join(os.Getenv("HONE_BENCH_MODELS"), name+"-"+dtype)
	if os.Getenv("HONE_BENCH_MODELS") == "" {
		dir = filepath.Join(os.TempDir(), "hone-train-bench-"+name+"-"+dtype)
	}
	if !model.ModelDirExists(dir) {
		o := synth.SmolLM2_135M()
		if name == "qwen2.5-0.5b" {
			o = synth.Qwen25_05B()
		}
		o.DType = dtype
		if err := synth.Write(dir, o); err != nil {
			b.Fatal(err)
		}
	}
	m, err := model.Load(dir, model.LoadOptions{Quantize: q})
	if err != nil {
		b.Fatal(err)
	}
	benchModels[key] = m
	return m
}

func peakRSSMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			var kb float64
			for _, f := range strings.Fields(line)[1:2] {
				for _, c := range f {
					kb = kb*10 + float64(c-'0')
				}
			}
			return kb / 1024
		}
	}
	return 0
}

// benchTurnTokens are the token rows the -rows cases train (ChatML's <|im_end|> and
// <|im_start|> in SmolLM2's and Qwen's vocabularies: ids 1 and 2 stand in), each placed in
// the sequence every 64 tokens, as a chat's turn markers are.
var benchTurnTokens = []int{1, 2}

// benchSeq is the benchmarks' 512-token sequence.
func benchSeq(m *model.Model, rows bool) []int {
	rng := rand.New(rand.NewPCG(1, 1))
	toks := make([]int, 512)
	for i := range toks {
		toks[i] = rng.IntN(m.Config.VocabSize)
		if rows && i%64 == 63 {
			toks[i] = benchTurnTokens[i/64%2]
		}
	}
	return toks
}

// BenchmarkSFTStep: one LoRA SFT step (forward, backward, AdamW) on one 512-token sequence,
// rank 16 on all seven modules, every token learned. Metrics: tokens/s and peak RSS. The
// -q8_0 and -q4_k cases train on the bf16 model quantized at load (QLoRA); the -rows cases
// train two token rows beside the adapter (trainable_tokens), tokens the sequence holds.
func BenchmarkSFTStep(b *testing.B) {
	for _, c := range []struct {
		name, dtype string
		q           gguf.TensorType
		rows        bool
	}{{"smollm2-135m", "f32", gguf.F32, false}, {"smollm2-135m", "bf16", gguf.F32, false}, {"qwen2.5-0.5b", "bf16", gguf.F32, false},
		{"smollm2-135m", "bf16", gguf.Q8_0, false}, {"smollm2-135m", "bf16", gguf.Q4_K, false},
		{"qwen2.5-0.5b", "bf16", gguf.Q8_0, false}, {"qwen2.5-0.5b", "bf16", gguf.Q4_K, false},
		{"smollm2-135m", "f32", gguf.F32, true}, {"smollm2-135m", "bf16", gguf.F32, true}, {"smollm2-135m", "bf16", gguf.Q8_0, true}} {
		sub := c.name + "-" + c.dtype
		if c.q != gguf.F32 {
			sub += "-" + strings.ToLower(c.q.String())
		}
		if c.rows {
			sub += "-rows"
		}
		b.Run(sub, func(b *testing.B) {
			if c.name == "qwen2.5-0.5b" && os.Getenv("HONE_BENCH_QWEN") == "" {
				b.Skip("set HONE_BENCH_QWEN=1 for the Qwen2.5-0.5B shape (2 GB of weights)")
			}
			m := benchModelQ(b, c.name, c.dtype, c.q)
			a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 16, Alpha: 32, Seed: 1})
			if c.rows {
				if _, err := AddTokenRows(m, a, benchTurnTokens); err != nil {
					b.Fatal(err)
				}
			}
			e, _ := NewTrainer(m, a)
			toks := benchSeq(m, c.rows)
			pk := Packed{Seq: Seq{Tokens: toks, Segments: []int{0}}, Train: make([]bool, len(toks))}
			for i := 1; i < len(toks); i++ {
				pk.Train[i] = true
			}
			plan := &SFTPlan{Batches: [][]Packed{{pk}}, cfg: SFTConfig{LearningRates: []float64{1e-4}, MaxGradNorm: 1}}
			var o *AdamW
			b.ResetTimer()
			start, cpu0 := time.Now(), cputime.Seconds()
			for i := 0; i < b.N; i++ {
				var err error
				if o, err = RunSFT(b.Context(), e, plan, o, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(512*b.N)/time.Since(start).Seconds(), "tokens/s")
			// CPU time per step (all threads): on a machine shared with other work it moves
			// less than the wall-clock rate does.
			b.ReportMetric((cputime.Seconds()-cpu0)/float64(b.N), "cpu-s/step")
			b.ReportMetric(peakRSSMB(), "peak-RSS-MB")
		})
	}
}

// BenchmarkRLStep: one RL step's pass (forward, the head's statistics, the coefficients,
// the head again and backward, AdamW) on one 512-token sequence whose second half is sampled
// (Seq.Need), rank 16 on all seven modules; -rows with two token rows as BenchmarkSFTStep's.
func BenchmarkRLStep(b *testing.B) {
	for _, c := range []struct {
		dtype string
		rows  bool
	}{{"f32", false}, {"f32", true}} {
		sub := "smollm2-135m-" + c.dtype
		if c.rows {
			sub += "-rows"
		}
		b.Run(sub, func(b *testing.B) {
			m := benchModelQ(b, "smollm2-135m", c.dtype, gguf.F32)
			a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 16, Alpha: 32, Seed: 1})
			if c.rows {
				if _, err := AddTokenRows(m, a, benchTurnTokens); err != nil {
					b.Fatal(err)
				}
			}
			e, _ := NewTrainer(m, a)
			s := Seq{Tokens: benchSeq(m, c.rows), Need: make([]bool, 512)}
			for i := 256; i < 511; i++ {
				s.Need[i] = true
			}
			coef := func(st TokenStats) []float32 {
				g := make([]float32, len(st.Logp))
				for i := range g {
					if s.Need[i] {
						g[i] = -(1 + st.Logp[i]*0.01) / 255 // a loss that depends on the statistics
					}
				}
				return g
			}
			o := NewAdamW(0)
			b.ResetTimer()
			start, cpu0 := time.Now(), cputime.Seconds()
			for i := 0; i < b.N; i++ {
				e.G.Zero()
				e.ForwardBackward(s, coef)
				e.G.Clip(1)
				o.Update(e.A, e.G, 1e-5)
			}
			b.ReportMetric(float64(512*b.N)/time.Since(start).Seconds(), "tokens/s")
			b.ReportMetric((cputime.Seconds()-cpu0)/float64(b.N), "cpu-s/step")
			b.ReportMetric(peakRSSMB(), "peak-RSS-MB")
		})
	}
}
