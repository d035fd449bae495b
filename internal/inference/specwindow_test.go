package inference

import (
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// TestSpecOnWindowedModel: a model whose every layer is windowed (Mistral), or whose sliding
// layers have a window cache of their own (Gemma 3), releases the KV blocks behind its
// window; speculation with the most proposals (64) rolls rejected ones back, which must never
// reach a released block: the output equals plain decoding's far past the window.
func TestSpecOnWindowedModel(t *testing.T) {
	for _, arch := range []string{"mistral", "gemma3"} {
		t.Run(arch, func(t *testing.T) { specOnWindowedModel(t, arch) })
	}
}

func specOnWindowedModel(t *testing.T, arch string) {
	dir := filepath.Join(t.TempDir(), "m")
	o := synth.Tiny(arch) // window 8
	o.Std = 0.1
	if arch == "gemma3" {
		o.Std = 0.2 // at 0.1 every proposal is accepted: nothing would roll back
	}
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var prompt []int
	for i := 0; i < 12; i++ {
		prompt = append(prompt, 20, 21, 22, 23, 24)
	}
	reqs := func(spec bool) []*Request {
		r := &Request{Prompt: prompt, Params: greedy(), MaxTokens: 150, IgnoreEOS: true, Logprobs: true}
		if spec {
			r.Speculative = ngram(MaxSpeculativeTokens, 1, 4)
		}
		return []*Request{r}
	}
	plain := New(m, Options{MaxBatchTokens: 256, BlockSize: 4})
	want := run(t, plain, reqs(false)...)
	plain.Close()
	e := New(m, Options{MaxBatchTokens: 256, BlockSize: 4})
	got := run(t, e, reqs(true)...)
	st := e.Stats()
	e.Close()
	sameResults(t, "windowed", got, want)
	if st.Spec.Drafts == 0 || st.Spec.DraftTokens == st.Spec.AcceptedTokens {
		t.Fatalf("no proposal rolled back: %+v", st.Spec)
	}
	t.Logf("spec stats %+v", st.Spec)
}
