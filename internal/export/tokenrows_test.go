package export_test

import (
	"bytes"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/export"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/quant"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/synth"
)

// withTokenRows gives a random token rows for ids: one set for a tied model, the
// embedding's and the head's otherwise.
func withTokenRows(a *model.LoRA, cfg *model.Config, ids []int, tied bool) {
	rng := rand.New(rand.NewPCG(7, 7))
	rows := func() *model.TokenRows {
		t := &model.TokenRows{IDs: ids, Rows: make([]float32, len(ids)*cfg.HiddenSize)}
		for i := range t.Rows {
			t.Rows[i] = float32(rng.NormFloat64() * 0.3)
		}
		return t
	}
	a.EmbedTokens = rows()
	a.HeadTokens = a.EmbedTokens
	if !tied {
		a.HeadTokens = rows()
	}
}

// TestExportTokenRows: an adapter's trainable token rows are merged by every export as the
// forward pass uses them: in the Hugging Face directory's embedding (and untied head), each
// row is the adapter's, bit for bit, every other row the base's bytes, and the merged model's
// embedding rows are those the base gives with the adapter, bit for bit, its logits the base's
// with the adapter; in a GGUF export from the directory and from an f32 GGUF base, the same
// bytes; from a Q8_0 base, the rows quantized alone into their places and every other row's
// bytes kept. A llama.cpp LoRA adapter cannot hold them: that export is refused by name, as is
// a head's rows on a base whose head is its embedding.
func TestExportTokenRows(t *testing.T) {
	for _, tied := range []bool{true, false} {
		name := "untied"
		if tied {
			name = "tied"
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			o := synth.Tiny("llama")
			o.Vocab, o.Std, o.Tied = 800, 0.1, tied
			if err := synth.Write(dir, o); err != nil {
				t.Fatal(err)
			}
			useSPMTokenizer(t, dir)
			bm, err := model.Load(dir, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer bm.Close()
			cfg := &bm.Config
			H := cfg.HiddenSize
			ids := []int{5, 300, 799}
			a := smallLoRA(cfg)
			withTokenRows(a, cfg, ids, tied)
			tmp := t.TempDir()
			p := func(n string) string { return filepath.Join(tmp, n) }

			// Hugging Face directory.
			if err := export.Write(p("hf"), dir, a); err != nil {
				t.Fatal(err)
			}
			bf, _ := safetensors.OpenDir(dir)
			defer bf.Close()
			of, err := safetensors.Open(filepath.Join(p("hf"), "model.safetensors"))
			if err != nil {
				t.Fatal(err)
			}
			defer of.Close()
			for _, c := range []struct {
				tensor string
				rows   *model.TokenRows
			}{{"model.embed_tokens.weight", a.EmbedTokens}, {"lm_head.weight", a.HeadTokens}} {
				bt, ok := bf.Tensor(c.tensor)
				if !ok {
					if !tied {
						t.Fatalf("the untied base has no %s", c.tensor)
					}
					continue
				}
				ot, _ := of.Tensor(c.tensor)
				got, _ := ot.F32()
				base, _ := bt.F32()
				for r := range cfg.VocabSize {
					want := base[r*H : (r+1)*H]
					if i := slices.Index(ids, r); i >= 0 {
						want = c.rows.Rows[i*H : (i+1)*H]
					}
					if !slices.Equal(got[r*H:(r+1)*H], want) {
						t.Fatalf("%s row %d is not the adapter's or the base's, bit for bit", c.tensor, r)
					}
				}
			}
			mm, err := model.Load(p("hf"), model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer mm.Close()
			got, want := make([]float32, H), make([]float32, H)
			for _, id := range ids {
				mm.EmbedRow(got, id)
				bm.EmbedRowFor(want, id, a)
				if !slices.Equal(got, want) {
					t.Fatalf("the merged model's embedding of token %d is not the adapter's", id)
				}
			}
			seqs := [][]int{{1, 5, 9, 300, 3, 799}, {300, 5, 5, 7}}
			wl, gl, pl := logits(t, bm, a, seqs), logits(t, mm, nil, seqs), logits(t, bm, nil, seqs)
			var maxDiff, maxChange float64
			for s := range wl {
				for q := range wl[s] {
					for _, id := range ids {
						maxDiff = math.Max(maxDiff, math.Abs(float64(wl[s][q][id]-gl[s][q][id])))
						maxChange = math.Max(maxChange, math.Abs(float64(wl[s][q][id]-pl[s][q][id])))
					}
				}
			}
			if maxDiff > 1e-4 || maxChange < 10*maxDiff {
				t.Fatalf("the rows' logits: merged vs adapter %g, the adapter's change %g", maxDiff, maxChange)
			}

			// GGUF from the directory and from an f32 GGUF base: the same bytes.
			if err := export.WriteGGUF(p("hf.gguf"), dir, a, "f32", "x"); err != nil {
				t.Fatal(err)
			}
			for _, c := range []struct{ out, typ string }{{"base-f32.gguf", "f32"}, {"base-q8.gguf", "q8_0"}} {
				if err := export.WriteGGUF(p(c.out), dir, nil, c.typ, "x"); err != nil {
					t.Fatal(err)
				}
			}
			if err := export.WriteGGUF(p("from-f32.gguf"), p("base-f32.gguf"), a, "", "x"); err != nil {
				t.Fatal(err)
			}
			fromHF, _ := tensorsOf(t, p("hf.gguf"))
			fromGGUF, _ := tensorsOf(t, p("from-f32.gguf"))
			ggufRows := map[string]*model.TokenRows{"token_embd.weight": a.EmbedTokens}
			if !tied {
				ggufRows["output.weight"] = a.HeadTokens
			}
			for n, rows := range ggufRows {
				g := fromHF[n]
				v, err := gguf.Dequantize(g.Type, g.Data, len(g.Data)/4)
				if err != nil || g.Type != gguf.F32 {
					t.Fatalf("%s: %s, %v", n, g.Type, err)
				}
				for i, id := range ids {
					if !slices.Equal(v[id*H:(id+1)*H], rows.Rows[i*H:(i+1)*H]) {
						t.Fatalf("%s row %d in the GGUF export is not the adapter's", n, id)
					}
				}
				if !bytes.Equal(fromGGUF[n].Data, g.Data) {
					t.Fatalf("%s: the export from the f32 GGUF base differs from the directory's", n)
				}
			}

			// A Q8_0 base: the rows quantized alone, every other row's bytes kept.
			if err := export.WriteGGUF(p("from-q8.gguf"), p("base-q8.gguf"), a, "", "x"); err != nil {
				t.Fatal(err)
			}
			baseQ8, _ := tensorsOf(t, p("base-q8.gguf"))
			fromQ8, _ := tensorsOf(t, p("from-q8.gguf"))
			rowBytes := H / 32 * 34
			for n, rows := range ggufRows {
				b, g := baseQ8[n], fromQ8[n]
				if g.Type != gguf.Q8_0 || len(g.Data) != len(b.Data) {
					t.Fatalf("%s: %s of %d bytes, the base's %s of %d", n, g.Type, len(g.Data), b.Type, len(b.Data))
				}
				for r := range cfg.VocabSize {
					want := b.Data[r*rowBytes : (r+1)*rowBytes]
					if i := slices.Index(ids, r); i >= 0 {
						want, _ = quant.Quantize(gguf.Q8_0, rows.Rows[i*H:(i+1)*H], H)
					}
					if !bytes.Equal(g.Data[r*rowBytes:(r+1)*rowBytes], want) {
						t.Fatalf("%s row %d of the Q8_0 export", n, r)
					}
				}
			}

			if err := export.WriteGGUFAdapter(p("lora.gguf"), dir, a, "x"); err == nil || !strings.Contains(err.Error(), "trainable token rows") {
				t.Fatalf("a GGUF LoRA of an adapter with token rows: %v", err)
			}
			if tied {
				untied := smallLoRA(cfg)
				withTokenRows(untied, cfg, ids, false)
				if err := export.Write(p("hf2"), dir, untied); err == nil || !strings.Contains(err.Error(), "tied") {
					t.Fatalf("an LM head's rows on a tied base: %v", err)
				}
				if err := export.WriteGGUF(p("x.gguf"), p("base-f32.gguf"), untied, "", "x"); err == nil || !strings.Contains(err.Error(), "tied") {
					t.Fatalf("an LM head's rows on a tied GGUF base: %v", err)
				}
			}
		})
	}
}
