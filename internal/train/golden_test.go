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
	g, m, a := loadGradGolden(t, "testdata/golden", goldenModel(), "gen.sh")
	e, err := NewTrainer(m, a)
	if err != nil {
		t.Fatal(err)
	}
	checkGradients(t, e, g.Tokens, g.Weights, g.Loss, g.Grads, 1e-4)
}

// TestPeftLoadsHoneCheckpoint: HF peft reads a checkpoint Hone wrote and computes the same
// next-token log-probabilities: a plain LoRA, and with trainable token rows (moved from the
// base's, tokens the sequence holds and predicts) on an untied Llama (the embedding's and the
// head's rows), a tied one and a Gemma 3 (scaled embedding), as PEFT's trainable_token_indices.
// Needs a Python with torch, transformers and peft named by HONE_TORCH_PYTHON
// (scripts/train-goldens/requirements.txt); skipped without one.
func TestPeftLoadsHoneCheckpoint(t *testing.T) {
	py := os.Getenv("HONE_TORCH_PYTHON")
	if py == "" {
		t.Skip("set HONE_TORCH_PYTHON to a Python with torch, transformers and peft")
	}
	for _, c := range []struct {
		name, arch string
		tied, rows bool
	}{{"lora", "llama", false, false}, {"rows-untied", "llama", false, true}, {"rows-tied", "llama", true, true}, {"rows-gemma3", "gemma3", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "m")
			o := goldenModel()
			if c.arch != "llama" {
				o = synth.Tiny(c.arch)
				o.Std = 0.2
			}
			o.Tied = c.tied
			if err := synth.Write(dir, o); err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(dir, model.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 4, Targets: []string{"q_proj", "v_proj", "down_proj"}})
			randomise(a, 6)
			tokens := []int{5, 17, 200, 3, 99, 41, 7, 300, 12, 17}
			if c.rows {
				if _, err := AddTokenRows(m, a, []int{17, 300, 2}); err != nil {
					t.Fatal(err)
				}
				moveRows(a.EmbedTokens, 1)
				if !c.tied {
					moveRows(a.HeadTokens, 2)
				}
			}
			ck := filepath.Join(t.TempDir(), "ck")
			if err := SaveCheckpoint(ck, a, Checkpoint{BaseModel: dir}); err != nil {
				t.Fatal(err)
			}
			e, _ := NewTrainer(m, a)
			want := e.Logprobs(Seq{Tokens: tokens}, a)
			if c.rows { // the rows matter: without them the log-probabilities differ
				plain := &model.LoRA{Rank: a.Rank, Alpha: a.Alpha, Scaling: a.Scaling, Targets: a.Targets, Layers: a.Layers}
				without, differ := e.Logprobs(Seq{Tokens: tokens}, plain), false
				for i := range without.Logp {
					differ = differ || math.Abs(float64(without.Logp[i]-want.Logp[i])) > 1e-2
				}
				if !differ {
					t.Fatal("the token rows change no log-probability")
				}
			}
			tj, _ := json.Marshal(tokens)
			out, err := exec.Command(py, "../../scripts/train-goldens/peft_load.py", dir, ck, string(tj)).Output()
			if err != nil {
				t.Fatalf("peft: %v", err)
			}
			var got []float64
			if err := json.Unmarshal(out[bytes.LastIndexByte(bytes.TrimSpace(out), '\n')+1:], &got); err != nil {
				t.Fatalf("peft output %q: %v", out, err)
			}
			if len(got) != len(tokens)-1 {
				t.Fatalf("peft gave %d log-probabilities", len(got))
			}
			for i, g := range got {
				if math.Abs(g-float64(want.Logp[i])) > 1e-4*math.Max(1, math.Abs(g)) {
					t.Fatalf("position %d: peft %.6f, Hone %.6f", i, g, want.Logp[i])
				}
			}
		})
	}
}

// gradGolden is a gradient golden of scripts/train-goldens: the SHA-256 of the synthetic
// model's weights it was made from, the tokens, per-position weights, PyTorch + peft's loss
// and the adapter's gradients by PEFT tensor name.
type gradGolden struct {
	WeightsSHA256 string               `json:"weights_sha256"`
	Tokens        []int                `json:"tokens"`
	Weights       []float64            `json:"weights"`
	Loss          float64              `json:"loss"`
	Grads         map[string][]float64 `json:"grads"`
}

// loadGradGolden reads the gradient golden gd/grads.json.gz, writes the synthetic model o,
// checks that its weights are the ones the golden was made from (script names the
// scripts/train-goldens script to rerun otherwise), and loads it with the adapter gd/adapter.
func loadGradGolden(t *testing.T, gd string, o synth.Options, script string) (*gradGolden, *model.Model, *model.LoRA) {
	t.Helper()
	f, err := os.Open(filepath.Join(gd, "grads.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(zr)
	var g gradGolden
	if err := json.Unmarshal(raw, &g); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, "model.safetensors"))
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != g.WeightsSHA256 {
		t.Fatalf("synth wrote other weights than the goldens were made from: rerun scripts/train-goldens/%s", script)
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := model.LoadLoRA(filepath.Join(gd, "adapter"), &m.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &g, m, a
}

// checkGradients runs the weighted next-token loss of a gradient golden
// (scripts/train-goldens: tokens, per-position weights, PyTorch + peft's loss and the
// adapter's gradients by PEFT tensor name) forward and backward with e, and compares the
// loss (to lossTol relative) and every adapter gradient (to 1e-4 of its tensor's largest
// value) with PyTorch's. It returns the loss, the tensors checked and the worst difference
// relative to a tensor's largest gradient.
func checkGradients(t *testing.T, e *Trainer, tokens []int, weights []float64, wantLoss float64, grads map[string][]float64, lossTol float64) (loss float64, checked int, worst float64) {
	t.Helper()
	w := make([]float32, len(tokens))
	for i, v := range weights {
		w[i] = float32(v)
	}
	st := e.ForwardBackward(Seq{Tokens: tokens}, weightedNLL(w))
	for i, v := range weights {
		loss -= v * float64(st.Logp[i])
	}
	if math.Abs(loss-wantLoss) > lossTol*math.Abs(wantLoss) {
		t.Fatalf("loss %.7f, PyTorch %.7f", loss, wantLoss)
	}
	for l, layer := range e.G.Layers {
		for mod, p := range layer {
			for _, ab := range []string{"A", "B"} {
				want, ok := grads[peftTensor(l, mod, ab)]
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
					d := math.Abs(float64(got[i]) - want[i])
					worst = math.Max(worst, d/scale)
					if d > 1e-4*scale+1e-6 {
						t.Fatalf("%s[%d] = %.7g, PyTorch %.7g (tensor max %.3g)", peftTensor(l, mod, ab), i, got[i], want[i], scale)
					}
				}
				checked++
			}
		}
	}
	if checked != len(grads) {
		t.Fatalf("checked %d tensors of %d", checked, len(grads))
	}
	return loss, checked, worst
}
