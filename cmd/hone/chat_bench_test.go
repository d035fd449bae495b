package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/sample"
	"github.com/honeai/hone/internal/synth"
)

// benchModelDir writes (once) the SmolLM2-135M-shaped model with bf16 weights, or uses
// HONE_BENCH_MODELS/smollm2-bf16 (see scripts/bench-model/run.sh).
func benchModelDir(b *testing.B) string {
	b.Helper()
	if d := os.Getenv("HONE_BENCH_MODELS"); d != "" {
		return filepath.Join(d, "smollm2-bf16")
	}
	dir := filepath.Join(os.TempDir(), "hone-bench-smollm2-bf16")
	if !model.ModelDirExists(dir) {
		o := synth.SmolLM2_135M()
		o.DType = "bf16"
		if err := synth.Write(dir, o); err != nil {
			b.Fatal(err)
		}
	}
	return dir
}

const benchPrompt = "Write a short story about a lighthouse keeper who finds a message in a bottle, in three paragraphs."

// streamOnce sends one streamed completion and returns its time to first token and its
// completion tokens.
func streamOnce(ctx context.Context, url, key string, maxTokens int) (time.Duration, int, error) {
	body := fmt.Sprintf(`{"model":"smol","messages":[{"role":"user","content":%q}],"max_tokens":%d,"ignore_eos":true,"temperature":0.8,"stream":true,"stream_options":{"include_usage":true},"return_token_ids":true}`, benchPrompt, maxTokens)
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return 0, 0, fmt.Errorf("status %d", resp.StatusCode)
	}
	var ttft time.Duration
	tokens := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: {") {
			continue
		}
		var ch struct {
			Choices []struct {
				TokenIDs []int `json:"token_ids"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		json.Unmarshal([]byte(line[len("data: "):]), &ch)
		if ttft == 0 && len(ch.Choices) > 0 && len(ch.Choices[0].TokenIDs) > 0 {
			ttft = time.Since(start)
		}
		if ch.Usage != nil {
			tokens = ch.Usage.CompletionTokens
		}
	}
	return ttft, tokens, sc.Err()
}

func median(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}

func heapMB() float64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapInuse) / (1 << 20)
}

// BenchmarkChatServing measures streamed chat completions through the real server (HTTP, SSE,
// scheduler, engine) on the SmolLM2-135M-shaped model with bf16 weights: each iteration runs
// `streams` concurrent requests of 64 completion tokens. Metrics: aggregate completion
// tokens/s, median time to first token, and the heap in use after the iteration (after GC),
// which must not grow across iterations.
func BenchmarkChatServing(b *testing.B) {
	dir := benchModelDir(b)
	data := b.TempDir()
	s := startServer(b, data, "--model", "smol="+dir, "--no-demo-model", "--no-prefix-cache", "--max-running", "64", "--max-batch-tokens", "512")
	key := initialKey(b, data)
	const maxTokens = 64
	for _, streams := range []int{1, 4, 16, 64} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			var tokens int
			var ttfts []time.Duration
			var heaps []float64
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				var wg sync.WaitGroup
				var mu sync.Mutex
				for k := 0; k < streams; k++ {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ttft, n, err := streamOnce(context.Background(), s.url, key, maxTokens)
						mu.Lock()
						defer mu.Unlock()
						if err != nil {
							b.Error(err)
							return
						}
						tokens += n
						ttfts = append(ttfts, ttft)
					}()
				}
				wg.Wait()
				b.StopTimer()
				heaps = append(heaps, heapMB())
				b.StartTimer()
			}
			elapsed := time.Since(start).Seconds()
			b.ReportMetric(float64(tokens)/elapsed, "tokens/s")
			b.ReportMetric(float64(median(ttfts).Milliseconds()), "ttft-ms")
			b.ReportMetric(heaps[len(heaps)-1], "heap-MB")
			b.ReportMetric(heaps[len(heaps)-1]-heaps[0], "heap-growth-MB")
		})
	}
}

// BenchmarkChatOverhead compares one short completion (8 tokens) through HTTP with the same
// work submitted to the engine directly: the difference per request is the cost of HTTP,
// JSON, templating, tokenising and streaming. Metric: overhead-ms per request. On the
// SmolLM2-shaped model the compute dwarfs it; on the tiny test model it shows.
func BenchmarkChatOverhead(b *testing.B) {
	tiny := filepath.Join(b.TempDir(), "tiny")
	if err := synth.Write(tiny, synth.Tiny("llama")); err != nil {
		b.Fatal(err)
	}
	b.Run("model=smollm2-bf16", func(b *testing.B) { chatOverhead(b, benchModelDir(b)) })
	b.Run("model=tiny", func(b *testing.B) { chatOverhead(b, tiny) })
}

func chatOverhead(b *testing.B, dir string) {
	data := b.TempDir()
	s := startServer(b, data, "--model", "smol="+dir, "--no-demo-model", "--no-prefix-cache")
	key := initialKey(b, data)
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	// The exact prompt the server builds, from its render route.
	code, _, body := do(b, "POST", s.url+"/v1/chat/completions/render", "Bearer "+key,
		fmt.Sprintf(`{"model":"smol","messages":[{"role":"user","content":%q}]}`, benchPrompt))
	var rendered struct {
		IDs []int `json:"prompt_token_ids"`
	}
	if err := json.Unmarshal(body, &rendered); code != 200 || err != nil || len(rendered.IDs) == 0 {
		b.Fatalf("render: %d %s", code, body)
	}
	ids := rendered.IDs
	eng := inference.New(m, inference.Options{NoPrefixCache: true})
	defer eng.Close()
	const n = 8
	var httpTotal, directTotal time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, got, err := streamOnce(context.Background(), s.url, key, n); err != nil || got != n {
			b.Fatalf("http: %v (%d tokens)", err, got)
		}
		httpTotal += time.Since(t0)
		t0 = time.Now()
		p := sample.Defaults()
		p.Temperature = 0.8
		h, err := eng.Submit(context.Background(), &inference.Request{Prompt: ids, Params: p, MaxTokens: n, IgnoreEOS: true})
		if err != nil {
			b.Fatal(err)
		}
		for range h.Events() {
		}
		directTotal += time.Since(t0)
	}
	b.ReportMetric(float64(httpTotal.Microseconds())/float64(b.N)/1000, "http-ms/req")
	b.ReportMetric(float64(directTotal.Microseconds())/float64(b.N)/1000, "engine-ms/req")
	b.ReportMetric(float64((httpTotal-directTotal).Microseconds())/float64(b.N)/1000, "overhead-ms/req")
}

// BenchmarkConstrainedDecode compares one stream's decode throughput with and without a
// structured-output constraint (a JSON schema of a free-text field and a list of numbers),
// alternating the two, 64 completion tokens each. Metrics: tokens/s of each and their ratio.
func BenchmarkConstrainedDecode(b *testing.B) {
	dir := benchModelDir(b)
	data := b.TempDir()
	s := startServer(b, data, "--model", "smol="+dir, "--no-demo-model", "--no-prefix-cache")
	key := initialKey(b, data)
	schema := `{"type":"object","properties":{"text":{"type":"string"},"n":{"type":"array","items":{"type":"integer"}}},"required":["text","n"]}`
	run := func(extra string) (time.Duration, int) {
		body := fmt.Sprintf(`{"model":"smol","messages":[{"role":"user","content":%q}],"max_tokens":64,"temperature":0.8,"seed":1%s}`, benchPrompt, extra)
		t0 := time.Now()
		code, _, resp := do(b, "POST", s.url+"/v1/chat/completions", "Bearer "+key, body)
		if code != 200 {
			b.Fatalf("%d %s", code, resp)
		}
		var r struct {
			Usage struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		json.Unmarshal(resp, &r)
		return time.Since(t0), r.Usage.CompletionTokens
	}
	run(`,"structured_outputs":{"json":` + schema + `}`) // compile and warm the masks
	var plainT, consT time.Duration
	var plainN, consN int
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, n := run("")
		plainT, plainN = plainT+d, plainN+n
		d, n = run(`,"structured_outputs":{"json":` + schema + `}`)
		consT, consN = consT+d, consN+n
	}
	p := float64(plainN) / plainT.Seconds()
	c := float64(consN) / consT.Seconds()
	b.ReportMetric(p, "plain-tokens/s")
	b.ReportMetric(c, "constrained-tokens/s")
	b.ReportMetric(c/p, "ratio")
}
