package synth

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/tokenizer"
)

// TestWriteFamily: each family's model loads with its special tokens, bos and eos (config.json
// too), no chat template and no generation_config.json; the end-of-turn id is the token's.
func TestWriteFamily(t *testing.T) {
	for name, fam := range Families {
		dir := filepath.Join(t.TempDir(), name)
		eot, err := WriteFamily(dir, Tiny("llama"), fam)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := tokenizer.Load(dir)
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(dir, model.LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		eos, _ := tok.TokenID(fam.EOS)
		if tok.TokenString(eot) != fam.EndOfTurn || !tok.IsSpecial(eot) || tok.ChatTemplate("") != "" ||
			len(m.Config.EOSIDs()) != 1 || m.Config.EOSIDs()[0] != eos || m.Config.VocabSize < tok.VocabSize() {
			t.Errorf("%s: eot %d %q, eos ids %v (want %d), template %q", name, eot, tok.TokenString(eot), m.Config.EOSIDs(), eos, tok.ChatTemplate(""))
		}
		m.Close()
		if _, err := os.Stat(filepath.Join(dir, "generation_config.json")); err == nil {
			t.Errorf("%s: generation_config.json written", name)
		}
	}
	if _, err := WriteFamily(t.TempDir(), Tiny("llama"), Family{Special: []string{"<a>"}, BOS: "<a>", EOS: "<b>", EndOfTurn: "<a>"}); err == nil {
		t.Fatal("an eos outside the special tokens was accepted")
	}
}
