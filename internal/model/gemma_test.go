package model_test

import (
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// Gemma's golden variants (scripts/model-goldens/gen.sh): TestLogitsMatchTransformers runs
// them with the others.
func init() {
	for _, a := range []string{"gemma2", "gemma3"} {
		goldenVariants[a] = func() synth.Options { return synth.Tiny(a) }
		goldenVariants[a+"-lora"] = func() synth.Options { return synth.Tiny(a) }
	}
}

func TestGemmaConfig(t *testing.T) {
	dir := t.TempDir()
	if err := synth.Write(dir, synth.Tiny("gemma3")); err != nil {
		t.Fatal(err)
	}
	c, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.Arch != "gemma3" || !c.QKNorm || !c.PostNorms || !c.GeluTanh || c.SlidingWindow != 8 || c.RopeLocalTheta != 1000 ||
		c.RopeScaling == nil || c.RopeScaling.Factor != 2.5 || c.QueryPreAttnScalar != 24 || c.FinalSoftcap != 0 {
		t.Fatalf("config %+v", c)
	}
}
