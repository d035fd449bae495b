package export_test

import (
	"bytes"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/export"
	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// spmLlama writes a tiny random Llama with the SentencePiece test vocabulary (a tokenizer
// the GGUF export writes) into a new directory.
func spmLlama(t *testing.T) (string, *model.Config) {
	t.Helper()
	dir := t.TempDir()
	o := synth.Tiny("llama")
	o.Vocab, o.Std = 800, 0.1
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	useSPMTokenizer(t, dir)
	cfg, err := model.LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	return dir, cfg
}

// tensorsOf reads a GGUF file's tensors (type and bytes, by name) and metadata.
func tensorsOf(t *testing.T, path string) (map[string]gguf.TensorData, *gguf.File) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	out := map[string]gguf.TensorData{}
	for _, n := range f.Names() {
		raw, err := f.Tensor(n)
		if err != nil {
			t.Fatal(err)
		}
		ti := f.Tensors[n]
		out[n] = gguf.TensorData{Name: n, Dims: ti.Dims, Type: ti.Type, Data: raw}
	}
	return out, f
}

// TestExportFromGGUFBase: a model trained on a GGUF base exports from that file. From an f32
// base, the merged GGUF holds exactly the tensors the export from the Hugging Face directory
// writes (Llama's permuted q/k rows included) and the same metadata; from a Q8_0 base, each
// tensor keeps its type, the unadapted ones their bytes, and the merged ones hold the base's
// dequantized weights plus the adapter's product within Q8_0's rounding; the GGUF LoRA adapter
// is the same file either way.
func TestExportFromGGUFBase(t *testing.T) {
	dir, cfg := spmLlama(t)
	a := smallLoRA(cfg)
	tmp := t.TempDir()
	p := func(n string) string { return filepath.Join(tmp, n) }
	for _, c := range []struct{ out, base, typ string }{
		{"base-f32.gguf", dir, "f32"}, {"base-q8.gguf", dir, "q8_0"}, {"from-hf.gguf", dir, "f32"},
	} {
		var lora *model.LoRA
		if c.out == "from-hf.gguf" {
			lora = a
		}
		if err := export.WriteGGUF(p(c.out), c.base, lora, c.typ, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if err := export.WriteGGUF(p("from-gguf.gguf"), p("base-f32.gguf"), a, "", "x"); err != nil {
		t.Fatal(err)
	}
	want, wf := tensorsOf(t, p("from-hf.gguf"))
	got, gf := tensorsOf(t, p("from-gguf.gguf"))
	if len(got) != len(want) {
		t.Fatalf("%d tensors from the GGUF base, %d from the directory", len(got), len(want))
	}
	for n, w := range want {
		g := got[n]
		if g.Type != w.Type || !bytes.Equal(g.Data, w.Data) {
			t.Errorf("%s: from the GGUF base %s (%d bytes), from the directory %s: not the same bytes", n, g.Type, len(g.Data), w.Type)
		}
	}
	for _, k := range wf.Metadata.Keys() {
		wv, _ := wf.Metadata.Get(k)
		gv, ok := gf.Metadata.Get(k)
		if !ok || !sameValue(wv, gv) {
			t.Errorf("metadata %s: from the GGUF base %.60v, from the directory %.60v", k, gv, wv)
		}
	}

	// A Q8_0 base, --type unset.
	if err := export.WriteGGUF(p("from-q8.gguf"), p("base-q8.gguf"), a, "", "x"); err != nil {
		t.Fatal(err)
	}
	base, _ := tensorsOf(t, p("base-q8.gguf"))
	q8, _ := tensorsOf(t, p("from-q8.gguf"))
	adapted := 0
	for n, b := range base {
		g := q8[n]
		if g.Type != b.Type {
			t.Errorf("%s: type %s, the base's %s", n, g.Type, b.Type)
		}
		if bytes.Equal(g.Data, b.Data) {
			continue
		}
		adapted++
		bv, _ := gguf.Dequantize(b.Type, b.Data, len(b.Data)/34*32)
		gv, _ := gguf.Dequantize(g.Type, g.Data, len(g.Data)/34*32)
		fv, _ := gguf.Dequantize(want[n].Type, want[n].Data, len(want[n].Data)/4) // f32: W + delta
		wb, _ := gguf.Dequantize(gguf.F32, tensorBytes(t, p("base-f32.gguf"), n), len(want[n].Data)/4)
		worst := 0.0
		for i := range gv {
			delta := float64(fv[i] - wb[i])
			worst = max(worst, math.Abs(float64(gv[i])-(float64(bv[i])+delta)))
		}
		if worst > 0.01 {
			t.Errorf("%s: merged Q8_0 values differ from the base's plus the adapter's product by up to %.3g", n, worst)
		}
	}
	if want := 5 * cfg.NumLayers; adapted != want {
		t.Errorf("%d tensors changed, want the adapter's %d", adapted, want)
	}
	if _, err := model.Load(p("from-q8.gguf"), model.LoadOptions{}); err != nil {
		t.Fatal(err)
	}

	// The adapter as a GGUF LoRA: the same from either base.
	if err := export.WriteGGUFAdapter(p("lora-hf.gguf"), dir, a, "x"); err != nil {
		t.Fatal(err)
	}
	if err := export.WriteGGUFAdapter(p("lora-gguf.gguf"), p("base-q8.gguf"), a, "x"); err != nil {
		t.Fatal(err)
	}
	lh, lhf := tensorsOf(t, p("lora-hf.gguf"))
	lg, lgf := tensorsOf(t, p("lora-gguf.gguf"))
	for n, w := range lh {
		if !bytes.Equal(lg[n].Data, w.Data) {
			t.Errorf("adapter tensor %s differs between the bases", n)
		}
	}
	ah, _ := lhf.Metadata.String("general.architecture")
	ag, _ := lgf.Metadata.String("general.architecture")
	if ah != ag || ag != "llama" {
		t.Errorf("adapter architecture %q from the GGUF base, %q from the directory", ag, ah)
	}

	// --type requantizes; a Hugging Face export from a GGUF base is refused.
	if err := export.WriteGGUF(p("from-q8-f16.gguf"), p("base-q8.gguf"), a, "f16", "x"); err != nil {
		t.Fatal(err)
	}
	f16, _ := tensorsOf(t, p("from-q8-f16.gguf"))
	if f16["blk.0.attn_q.weight"].Type != gguf.F16 {
		t.Errorf("--type f16: attn_q is %s", f16["blk.0.attn_q.weight"].Type)
	}
	if err := export.Write(p("hf-out"), p("base-q8.gguf"), a); err == nil || !strings.Contains(err.Error(), "GGUF") {
		t.Errorf("Hugging Face export from a GGUF base: %v", err)
	}
}

// tensorBytes is one tensor's bytes in a GGUF file (a copy).
func tensorBytes(t *testing.T, path, name string) []byte {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raw, err := f.Tensor(name)
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), raw...)
}

// TestWriteGGUFProgress: a GGUF export tells its progress after each tensor, from either kind
// of base and with a tied head, ending at every tensor with the bytes of all the tensor data
// written.
func TestWriteGGUFProgress(t *testing.T) {
	dir, _ := spmLlama(t)
	tmp := t.TempDir()
	gemma, _ := gemmaExport(t, "gemma3") // tied: the head is the embedding, not written twice
	for _, c := range []struct{ base, out, typ string }{
		{dir, filepath.Join(tmp, "a.gguf"), "q8_0"},
		{filepath.Join(tmp, "a.gguf"), filepath.Join(tmp, "b.gguf"), ""},
		{gemma, filepath.Join(tmp, "g.gguf"), "f16"},
	} {
		var calls, last, lastTotal int
		var bytes int64
		err := export.WriteGGUFProgress(c.out, c.base, nil, c.typ, "x", func(done, total int, b int64) {
			if done != last+1 || b < bytes {
				t.Fatalf("progress %d/%d (%d bytes) after %d (%d bytes)", done, total, b, last, bytes)
			}
			calls, last, lastTotal, bytes = calls+1, done, total, b
		})
		if err != nil {
			t.Fatal(err)
		}
		ts, _ := tensorsOf(t, c.out)
		var want int64
		for _, td := range ts {
			want += int64(len(td.Data))
		}
		if last != lastTotal || bytes != want {
			t.Fatalf("%s: progress ended at %d/%d with %d bytes; the file has %d tensors, %d bytes", c.out, last, lastTotal, bytes, len(ts), want)
		}
	}
}
