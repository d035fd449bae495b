package inference

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkSpecDecodeSmolLM2: greedy decoding on the real SmolLM2-135M-Instruct
// (HONE_SMOLLM2_DIR) of three repetitive tasks (rewrite a paragraph with one word changed;
// copy the JSON object out of a log line; extract an email's fields as JSON), plain and with prompt-lookup speculation, in the same run.
// Reports generated tokens/s, the tokens emitted per forward pass and the fraction of
// proposed tokens accepted. One request at a time (batch 1) and four at once.
func BenchmarkSpecDecodeSmolLM2(b *testing.B) {
	m, tok := smolLM2(b)
	p := greedy()
	p.EOS = m.Config.EOSIDs()
	tasks := []struct {
		name, text string
	}{{"edit", copyTask}, {"json-log", logTask}, {"json-fields", jsonTask}}
	modes := []struct {
		name string
		spec *Speculative
	}{{"ngram-k4-2to4", ngram(4, 2, 4)}, {"ngram-k8-2to4", ngram(8, 2, 4)}}
	for _, batch := range []int{1, 4} {
		for _, task := range tasks {
			ids := smolPrompt(tok, task.text)
			for _, mode := range modes {
				b.Run(fmt.Sprintf("batch=%d/task=%s/%s", batch, task.name, mode.name), func(b *testing.B) {
					plain := New(m, Options{NoPrefixCache: true})
					defer plain.Close()
					spec := New(m, Options{NoPrefixCache: true, Speculative: mode.spec})
					defer spec.Close()
					var tokens [2]int
					var elapsed [2]time.Duration
					// Each iteration runs the batch plainly, then with speculation: the pair
					// sees the same load on a shared machine. The time includes the prompt's
					// prefill (the same in both).
					for b.Loop() {
						for k, e := range []*Engine{plain, spec} {
							var reqs []*Request
							for range batch {
								reqs = append(reqs, &Request{Prompt: ids, Params: p, MaxTokens: 96})
							}
							t0 := time.Now()
							res := run(b, e, reqs...)
							elapsed[k] += time.Since(t0)
							for _, r := range res {
								tokens[k] += len(r[0].tokens)
							}
						}
					}
					if tokens[0] != tokens[1] {
						b.Fatalf("plain decoding gave %d tokens, speculation %d", tokens[0], tokens[1])
					}
					plainRate := float64(tokens[0]) / elapsed[0].Seconds()
					specRate := float64(tokens[1]) / elapsed[1].Seconds()
					st := spec.Stats()
					b.ReportMetric(plainRate, "plain-tok/s")
					b.ReportMetric(specRate, "spec-tok/s")
					b.ReportMetric(specRate/plainRate, "speedup")
					b.ReportMetric(float64(st.GeneratedTokens)/float64(st.Steps), "tok/step")
					if st.Spec.DraftTokens > 0 {
						b.ReportMetric(float64(st.Spec.AcceptedTokens)/float64(st.Spec.DraftTokens), "accept")
					}
				})
			}
		}
	}
}
