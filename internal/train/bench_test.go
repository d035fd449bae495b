package train

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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

// BenchmarkSFTStep: one LoRA SFT step (forward, backward, AdamW) on one 512-token sequence,
// rank 16 on all seven modules, every token learned. Metrics: tokens/s and peak RSS. The
// -q8_0 and -q4_k cases train on the bf16 model quantized at load (QLoRA).
func BenchmarkSFTStep(b *testing.B) {
	for _, c := range []struct {
		name, dtype string
		q           gguf.TensorType
	}{{"smollm2-135m", "f32", gguf.F32}, {"smollm2-135m", "bf16", gguf.F32}, {"qwen2.5-0.5b", "bf16", gguf.F32},
		{"smollm2-135m", "bf16", gguf.Q8_0}, {"smollm2-135m", "bf16", gguf.Q4_K},
		{"qwen2.5-0.5b", "bf16", gguf.Q8_0}, {"qwen2.5-0.5b", "bf16", gguf.Q4_K}} {
		sub := c.name + "-" + c.dtype
		if c.q != gguf.F32 {
			sub += "-" + strings.ToLower(c.q.String())
		}
		b.Run(sub, func(b *testing.B) {
			if c.name == "qwen2.5-0.5b" && os.Getenv("HONE_BENCH_QWEN") == "" {
				b.Skip("set HONE_BENCH_QWEN=1 for the Qwen2.5-0.5B shape (2 GB of weights)")
			}
			m := benchModelQ(b, c.name, c.dtype, c.q)
			a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 16, Alpha: 32, Seed: 1})
			e, _ := NewTrainer(m, a)
			rng := rand.New(rand.NewPCG(1, 1))
			toks := make([]int, 512)
			for i := range toks {
				toks[i] = rng.IntN(m.Config.VocabSize)
			}
			pk := Packed{Seq: Seq{Tokens: toks, Segments: []int{0}}, Train: make([]bool, len(toks))}
			for i := 1; i < len(toks); i++ {
				pk.Train[i] = true
			}
			plan := &SFTPlan{Batches: [][]Packed{{pk}}, cfg: SFTConfig{LearningRates: []float64{1e-4}, MaxGradNorm: 1}}
			var o *AdamW
			b.ResetTimer()
			start, cpu0 := time.Now(), cpuSeconds()
			for i := 0; i < b.N; i++ {
				var err error
				if o, err = RunSFT(b.Context(), e, plan, o, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(512*b.N)/time.Since(start).Seconds(), "tokens/s")
			// CPU time per step (all threads): on a machine shared with other work it moves
			// less than the wall-clock rate does.
			b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/step")
			b.ReportMetric(peakRSSMB(), "peak-RSS-MB")
		})
	}
}
