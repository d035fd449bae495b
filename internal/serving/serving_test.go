package serving

import (
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/structured"
	"github.com/honeai/hone/internal/synth"
)

// TestLoadAndModels: a model directory loads with its tokenizer, template and engine (or none
// for training only); the first model added is the default; the guide factory constrains
// with the model's own vocabulary.
func TestLoadAndModels(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(dir, synth.Tiny("qwen3")); err != nil {
		t.Fatal(err)
	}
	a, err := Load("a", dir, LoadOptions{Engine: inference.Options{MaxRunning: 2}}, 7)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Engine == nil || a.Template == nil || a.Tok == nil || a.Created != 7 || a.MaxModelLen() != a.Model.Config.MaxPositionEmbeddings {
		t.Fatalf("served %+v", a)
	}
	b, err := Load("b", dir, LoadOptions{NoEngine: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Engine != nil {
		t.Fatal("NoEngine started an engine")
	}
	if _, err := Load("c", filepath.Join(t.TempDir(), "missing"), LoadOptions{}, 0); err == nil {
		t.Fatal("a missing directory loaded")
	}

	ms := NewModels()
	if _, ok := ms.Get(""); ok {
		t.Fatal("an empty set has a default")
	}
	ms.Add(b)
	ms.Add(a)
	if d, _ := ms.Get(""); d != b {
		t.Fatal("the first added is not the default")
	}
	if got, ok := ms.Get("a"); !ok || got != a {
		t.Fatal("Get by name")
	}
	if l := ms.List(); len(l) != 2 || l[0] != b || l[1] != a {
		t.Fatal("List order")
	}

	c, err := a.Guides().Compile(&structured.Spec{Kind: "regex", Regex: "ab"})
	if err != nil {
		t.Fatal(err)
	}
	g := a.GuideFactory(c).NewGuide()
	mask := make([]uint64, (a.Model.Config.VocabSize+63)/64)
	g.Mask(mask)
	allowed := 0
	for id := 0; id < a.Model.Config.VocabSize; id++ {
		if mask[id/64]>>(id%64)&1 == 1 {
			allowed++
			if b := string(a.Tok.TokenBytes(id)); b != "a" && b != "ab" {
				t.Errorf("token %q allowed at the start of /ab/", b)
			}
		}
	}
	if allowed == 0 {
		t.Fatal("nothing allowed")
	}
}
