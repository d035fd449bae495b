package train

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// goldenModel is the model of scripts/train-goldens/gen.sh
// (`hone models synth --arch llama --std 0.2`); keep in step.
func goldenModel() synth.Options {
	o := synth.Tiny("llama")
	o.Std = 0.2
	return o
}

// TestGradientsMatchPyTorch: the adapter gradients of a weighted next-token loss agree with
// PyTorch + peft (float64) on the same synthetic model and adapter.
func TestGradientsMatchPyTorch(t *testing.T) {
	f, err := os.Open("testdata/golden/grads.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	var g struct {
		WeightsSHA256 string               `json:"weights_sha256"`
		Tokens        []int                `json:"tokens"`
		Weights       []float64            `json:"weights"`
		Loss          float64              `json:"loss"`
		Grads         map[string][]float64 `json:"grads"`
	}
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Write(dir, goldenModel()); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != g.WeightsSHA256 {
		t.Fatalf("synth wrote other weights than the goldens were made from: rerun scripts/train-goldens/gen.sh")
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := model.LoadLoRA("testdata/golden/adapter", &m.Config)
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewTrainer(m, a)
	if err != nil {
		t.Fatal(err)
	}
	w := make([]float32, len(g.Tokens))
	for i, v := range g.Weights {
		w[i] = float32(v)
	}
	st := e.ForwardBackward(Seq{Tokens: g.Tokens}, weightedNLL(w))
	loss := 0.0
	for i, v := range g.Weights {
		loss -= v * float64(st.Logp[i])
	}
	if math.Abs(loss-g.Loss) > 1e-4*math.Abs(g.Loss) {
		t.Fatalf("loss %.6f, PyTorch %.6f", loss, g.Loss)
	}
	checked := 0
	for l, layer := range e.G.Layers {
		for mod, p := range layer {
			for _, ab := range []string{"A", "B"} {
				want, ok := g.Grads[peftTensor(l, mod, ab)]
				if !ok {
					t.Fatalf("no golden for %s", peftTensor(l, mod, ab))
				}
				got := p.A
				if ab == "B" {
					got = p.B
				}
				scale := 0.0
				for _, v := range want {
					scale = math.Max(scale, math.Abs(v))
				}
				for i := range want {
					if d := math.Abs(float64(got[i]) - want[i]); d > 1e-4*scale+1e-6 {
						t.Fatalf("%s[%d] = %.7g, PyTorch %.7g (tensor max %.3g)", peftTensor(l, mod, ab), i, got[i], want[i], scale)
					}
				}
				checked++
			}
		}
	}
	if checked != len(g.Grads) {
		t.Fatalf("checked %d tensors of %d", checked, len(g.Grads))
	}
}

// TestPeftLoadsHoneCheckpoint: HF peft reads a checkpoint Hone wrote and computes the same
// next-token log-probabilities. Needs a Python with torch, transformers and peft named by
// HONE_TORCH_PYTHON (scripts/train-goldens/requirements.txt); skipped without one.
func TestPeftLoadsHoneCheckpoint(t *testing.T) {
	py := os.Getenv("HONE_TORCH_PYTHON")
	if py == "" {
		t.Skip("set HONE_TORCH_PYTHON to a Python with torch, transformers and peft")
	}
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Write(dir, goldenModel()); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 4, Targets: []string{"q_proj", "v_proj", "down_proj"}})
	randomise(a, 6)
	ck := filepath.Join(t.TempDir(), "ck")
	if err := SaveCheckpoint(ck, a, Checkpoint{BaseModel: dir}); err != nil {
		t.Fatal(err)
	}
	e, _ := NewTrainer(m, a)
	tokens := []int{5, 17, 200, 3, 99, 41, 7, 300, 12}
	want := e.Logprobs(Seq{Tokens: tokens}, a)
	tj, _ := json.Marshal(tokens)
	out, err := exec.Command(py, "../../scripts/train-goldens/peft_load.py", dir, ck, string(tj)).Output()
	if err != nil {
		t.Fatalf("peft: %v", err)
	}
	var got []float64
	if err := json.Unmarshal(out[bytes.LastIndexByte(bytes.TrimSpace(out), '\n')+1:], &got); err != nil {
		t.Fatalf("peft output %q: %v", out, err)
	}
	for i, g := range got {
		if math.Abs(g-float64(want.Logp[i])) > 1e-4*math.Max(1, math.Abs(g)) {
			t.Fatalf("position %d: peft %.6f, Hone %.6f", i, g, want.Logp[i])
		}
	}
}
