package serving

import (
	"os"
	"testing"

	"github.com/honeai/hone/internal/inference"
)

// A GGUF file is served as a directory is: model, tokenizer, chat template and engine.
func TestLoadGGUF(t *testing.T) {
	path := os.Getenv("HONE_SMOLLM2_GGUF")
	if path == "" {
		t.Skip("HONE_SMOLLM2_GGUF is not set (scripts/test-setup.sh)")
	}
	s, err := Load("smol", path, LoadOptions{Engine: inference.Options{MaxRunning: 1}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Engine == nil || s.Template == nil || s.Tok == nil || s.MaxModelLen() != 8192 || s.Dir != path {
		t.Fatalf("served %+v", s)
	}
	if eos, ok := s.Tok.EOS(); !ok || eos != 2 {
		t.Fatalf("EOS %d %v", eos, ok)
	}
}
