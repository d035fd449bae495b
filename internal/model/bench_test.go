package model_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/honeai/hone/internal/cputime"
	"github.com/honeai/hone/internal/gemm"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/quant"
	"github.com/honeai/hone/internal/synth"
)

var (
	benchMu     sync.Mutex
	benchModels = map[string]*model.Model{}
)

// benchDTypes are the models the benchmarks run on: the SmolLM2-135M-shaped model stored as
// f32 and bf16, and, when HONE_BENCH_GGUF names a GGUF file (the SmolLM2 Q4_1 one, say), that
// file loaded as it is ("gguf": its quantized matrices stay quantized) and dequantized to f32
// ("gguf-f32", --dtype f32).
func benchDTypes() []string {
	d := []string{"f32", "bf16"}
	if os.Getenv("HONE_BENCH_GGUF") != "" {
		d = append(d, "gguf", "gguf-f32")
	}
	return d
}

// smolLM2 loads (writing it once into the temp dir) the SmolLM2-135M-shaped model with random
// weights stored as dtype, or HONE_BENCH_GGUF for "gguf" and "gguf-f32".
func smolLM2(b *testing.B, dtype string) *model.Model {
	b.Helper()
	benchMu.Lock()
	defer benchMu.Unlock()
	if m, ok := benchModels[dtype]; ok {
		return m
	}
	if path, ok := strings.CutPrefix(dtype, "gguf"); ok {
		// HONE_BENCH_GEMM_ROWS sets quant.GEMMRows (from how many rows a quantized product
		// goes by dequantized tiles and the f32 GEMM) to compare the two paths.
		if v := os.Getenv("HONE_BENCH_GEMM_ROWS"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				b.Fatal(err)
			}
			quant.GEMMRows = n
		}
		opts := model.LoadOptions{}
		if path == "-f32" {
			opts.DType = model.DTypeF32
		}
		m, err := model.Load(os.Getenv("HONE_BENCH_GGUF"), opts)
		if err != nil {
			b.Fatal(err)
		}
		m.Prepack()
		benchModels[dtype] = m
		return m
	}
	// HONE_BENCH_MODELS names a directory holding smollm2-f32/ and smollm2-bf16/ written by
	// `hone models synth --preset smollm2-135m` (scripts/bench-model/run.sh does), so that the
	// peak memory measured is the model's alone; without it the model is written here.
	dir := filepath.Join(os.Getenv("HONE_BENCH_MODELS"), "smollm2-"+dtype)
	if os.Getenv("HONE_BENCH_MODELS") == "" {
		dir = filepath.Join(sharedTmp(b), "smollm2-135m-"+dtype)
	}
	if !model.ModelDirExists(dir) {
		o := synth.SmolLM2_135M()
		o.DType = dtype
		if err := synth.Write(dir, o); err != nil {
			b.Fatal(err)
		}
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	benchModels[dtype] = m
	return m
}

// benchKV is the KV cache dtype of the benchmarks: HONE_BENCH_KV_DTYPE (auto, f32 or f16;
// default f32, what every figure before the f16 cache was measured with).
func benchKV(b *testing.B) kvcache.DType {
	v := os.Getenv("HONE_BENCH_KV_DTYPE")
	if v == "" {
		return kvcache.F32
	}
	d, err := kvcache.ParseDType(v)
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// peakRSSMB reads the process's peak resident set (VmHWM) in MB, 0 where /proc is missing.
func peakRSSMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			kb, _ := strconv.ParseFloat(f[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// BenchmarkPrefill measures prompt processing: batch sequences of 128 tokens each (or
// HONE_BENCH_PREFILL_LEN: attention's share grows with it) in one forward pass (logits of the
// last position only, as serving asks).
func BenchmarkPrefill(b *testing.B) {
	n := 128
	if v := os.Getenv("HONE_BENCH_PREFILL_LEN"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			b.Fatalf("HONE_BENCH_PREFILL_LEN=%q", v)
		}
	}
	for _, dtype := range benchDTypes() {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/batch%d", dtype, batch), func(b *testing.B) {
				m := smolLM2(b, dtype)
				cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: batch * (n + 15) / 16, DType: benchKV(b)})
				rng := rand.New(rand.NewPCG(1, 1))
				steps := make([]model.Step, batch)
				for i := range steps {
					steps[i] = model.Step{Seq: cache.NewSequence(), Tokens: randTokens(rng, n, 4096), LogitsAt: []int{n - 1}}
				}
				b.ResetTimer()
				cpu0 := cputime.Seconds()
				for it := 0; it < b.N; it++ {
					if _, err := m.Forward(steps); err != nil {
						b.Fatal(err)
					}
					for _, st := range steps {
						st.Seq.Free()
					}
				}
				b.ReportMetric(float64(b.N*batch*n)/b.Elapsed().Seconds(), "tokens/s")
				// CPU time per pass (all threads): on a machine shared with other work it moves
				// less than the wall-clock rate does.
				b.ReportMetric((cputime.Seconds()-cpu0)*1000/float64(b.N), "cpu-ms/pass")
				b.ReportMetric(peakRSSMB(), "peak-RSS-MB")
			})
		}
	}
}

// decodeWarmup counts the decode steps BenchmarkDecode ran, untimed, while a prefetch tuner
// measured (the tuners decide once per process).
var decodeWarmup int

// BenchmarkDecode measures generation: batch sequences, each with 128 tokens of context, all
// advancing by one token per forward pass up to 256 tokens, then back to 128 (as llama.cpp's
// batched-bench with -npp 128 -ntg 128 measures). The logits go into one buffer reused from
// step to step (ForwardInto), as the serving engine's loop does.
func BenchmarkDecode(b *testing.B) {
	for _, dtype := range benchDTypes() {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/batch%d", dtype, batch), func(b *testing.B) {
				m := smolLM2(b, dtype)
				// HONE_BENCH_DECODE_CTX: the context (default 128) to decode 128 tokens from.
				ctx := 128
				if v := os.Getenv("HONE_BENCH_DECODE_CTX"); v != "" {
					var err error
					if ctx, err = strconv.Atoi(v); err != nil || ctx < 1 {
						b.Fatalf("HONE_BENCH_DECODE_CTX=%q", v)
					}
				}
				cache := model.NewKVCache(&m.Config, kvcache.Options{BlockSize: 16, NumBlocks: batch * ((ctx+128)/16 + 2), DType: benchKV(b)})
				rng := rand.New(rand.NewPCG(2, 2))
				steps := make([]model.Step, batch)
				var prefill []model.Step
				for i := range steps {
					s := cache.NewSequence()
					prefill = append(prefill, model.Step{Seq: s, Tokens: randTokens(rng, ctx, 4096)})
					steps[i] = model.Step{Seq: s, Tokens: []int{rng.IntN(4096)}, LogitsAt: []int{0}}
				}
				if _, err := m.Forward(prefill); err != nil {
					b.Fatal(err)
				}
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				gcs := ms.NumGC
				var logits []float32 // reused from step to step, as the serving engine does
				step := func() {
					if _, err := m.ForwardInto(steps, &logits); err != nil {
						b.Fatal(err)
					}
					if steps[0].Seq.Len() >= ctx+128 { // keep the context length steady
						b.StopTimer()
						for _, st := range steps {
							st.Seq.Truncate(ctx)
						}
						b.StartTimer()
					}
				}
				// Steady decode: the prefetch tuners time their first products in both modes
				// (gemm.PrefetchTuner); the clock starts once they have decided (at most 2,000
				// steps; HONE_BENCH_NO_WARMUP=1 times from the first step, the tuning included).
				if os.Getenv("HONE_BENCH_NO_WARMUP") != "1" {
					for step(); gemm.Tuning() && decodeWarmup < 2000; decodeWarmup++ {
						step()
					}
				}
				b.ResetTimer()
				cpu0 := cputime.Seconds() // the steps' CPU time, all threads (truncations included)
				for it := 0; it < b.N; it++ {
					step()
				}
				cpu := cputime.Seconds() - cpu0
				b.StopTimer()
				b.ReportMetric(float64(decodeWarmup), "warmup-steps") // in this process, so far
				runtime.ReadMemStats(&ms)
				b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "tokens/s")
				// CPU time per step: on a shared machine the wall time moves with the other
				// work, the CPU time much less.
				b.ReportMetric(cpu*1000/float64(b.N), "cpu-ms/step")
				// The whole model's read bandwidth: the weights one step reads, per second
				// (compare with BenchmarkMemoryBandwidth in internal/gemm at batch 1).
				if w := m.DecodeWeightBytes(); w > 0 {
					b.ReportMetric(float64(w)*float64(b.N)/b.Elapsed().Seconds()/1e9, "weights-GB/s")
				}
				// The collections the steps' garbage caused: their cost grows with the live
				// heap and they stop the workers of the products they interrupt.
				b.ReportMetric(float64(ms.NumGC-gcs)/float64(b.N*batch), "GCs/token")
				b.ReportMetric(peakRSSMB(), "peak-RSS-MB")
			})
		}
	}
}
