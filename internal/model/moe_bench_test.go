package model_test

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/kvcache"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// moeBenchShape is a small Qwen3-MoE shape for the decode benchmark: 4 layers, hidden 512, 8
// heads of 64 (2 KV heads), 32 experts of width 256, 4 per token, vocabulary 4096; about 50M
// parameters, 6M active per token.
func moeBenchShape() synth.Options {
	o := synth.Tiny("qwen3moe")
	o.Layers, o.Hidden, o.Heads, o.KVHeads, o.HeadDim, o.Intermediate = 4, 512, 8, 2, 64, 1024
	o.Experts, o.ExpertsPerTok, o.MoEIntermediate, o.Vocab, o.MaxPos = 32, 4, 256, 4096, 2048
	o.Std = 0.05
	return o
}

// peakRSS is the process's peak resident memory (VmHWM), in MiB; 0 where /proc is absent.
func peakRSS() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kb) / 1024
		}
	}
	return 0
}

// BenchmarkQwen3MoEDecodeQ4K decodes one token at a time (after a 32-token prompt) with
// every matrix of the moeBenchShape model in Q4_K (the routers f32), loaded from a GGUF in
// llama.cpp's layout (merged 3-D expert tensors, multiplied as per-expert views). It reports
// tokens/s and the process's peak RSS. HONE_MOE_BENCH_GGUF=PATH keeps the GGUF there (to run
// llama-bench on the same file), or loads it from there when it exists: then the peak RSS is
// the model's and the decode's alone, not writing the synthetic model's.
func BenchmarkQwen3MoEDecodeQ4K(b *testing.B) {
	o := moeBenchShape()
	keep := os.Getenv("HONE_MOE_BENCH_GGUF")
	path := keep
	if _, err := os.Stat(keep); keep == "" || err != nil {
		_, path = moeGGUF(b, o, gguf.Q4_K, true)
	}
	if keep != "" && path != keep {
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(keep, data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	m, err := model.Load(path, model.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	seq := model.NewKVCache(&m.Config, kvcache.Options{NumBlocks: 256}).NewSequence()
	prompt := make([]int, 32)
	for i := range prompt {
		prompt[i] = (i*37 + 11) % o.Vocab
	}
	if _, err := m.Forward([]model.Step{{Seq: seq, Tokens: prompt, LogitsAt: []int{31}}}); err != nil {
		b.Fatal(err)
	}
	tok := 7
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if seq.Len() >= m.Config.MaxPositionEmbeddings-1 {
			seq.Truncate(32)
		}
		out, err := m.Forward([]model.Step{{Seq: seq, Tokens: []int{tok}, LogitsAt: []int{0}}})
		if err != nil {
			b.Fatal(err)
		}
		tok = argmax(out[0][0])
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
	b.ReportMetric(peakRSS(), "peak-RSS-MiB")
	b.ReportMetric(float64(m.WeightBytes())/(1<<20), "weights-MiB")
}
