package inference

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/tokenizer"
)

// BenchmarkSpecDecodeSmolLM2: greedy decoding on the real SmolLM2-135M-Instruct
// (HONE_SMOLLM2_DIR) of three repetitive tasks (rewrite a paragraph with one word changed;
// copy the JSON object out of a log line; extract an email's fields as JSON), plain and with prompt-lookup speculation, in the same run.
// Reports generated tokens/s, the tokens emitted per forward pass and the fraction of
// proposed tokens accepted. One request at a time (batch 1) and four at once.
func BenchmarkSpecDecodeSmolLM2(b *testing.B) {
	dir := os.Getenv("HONE_SMOLLM2_DIR")
	if dir == "" {
		b.Skip("HONE_SMOLLM2_DIR not set")
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		b.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		b.Fatal(err)
	}
	p := greedy()
	p.EOS = m.Config.EOSIDs()
	tasks := []struct {
		name, text string
	}{{"edit", copyTask}, {"json-log", logTask}, {"json-fields", jsonTask}}
	modes := []struct {
		name string
		spec *Speculative
	}{{"plain", nil}, {"ngram-k4-2to4", ngram(4, 2, 4)}, {"ngram-k8-2to4", ngram(8, 2, 4)}}
	for _, batch := range []int{1, 4} {
		for _, task := range tasks {
			ids := smolPrompt(tok, task.text)
			for _, mode := range modes {
				b.Run(fmt.Sprintf("batch=%d/task=%s/%s", batch, task.name, mode.name), func(b *testing.B) {
					e := New(m, Options{NoPrefixCache: true})
					defer e.Close()
					var tokens int
					var elapsed time.Duration
					for b.Loop() {
						var reqs []*Request
						for range batch {
							reqs = append(reqs, &Request{Prompt: ids, Params: p, MaxTokens: 96, Speculative: mode.spec})
						}
						// The time includes the prompt's prefill (the same with and without).
						t0 := time.Now()
						res := run(b, e, reqs...)
						elapsed += time.Since(t0)
						for _, r := range res {
							tokens += len(r[0].tokens)
						}
					}
					st := e.Stats()
					b.ReportMetric(float64(tokens)/elapsed.Seconds(), "tok/s")
					b.ReportMetric(float64(st.GeneratedTokens)/float64(st.Steps), "tok/step")
					if st.Spec.DraftTokens > 0 {
						b.ReportMetric(float64(st.Spec.AcceptedTokens)/float64(st.Spec.DraftTokens), "accept")
					}
				})
			}
		}
	}
}
