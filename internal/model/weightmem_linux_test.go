package model_test

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// residentKB is the process's resident memory (VmRSS, kB) once the garbage is collected and
// given back to the system (and the cleanups that unmap packs and KV chunks have run): the Go
// heap's live part, the anonymous mappings (packs) and the resident pages of mapped files.
func residentKB(t *testing.T) int64 {
	t.Helper()
	prev := int64(-1)
	for range 50 {
		runtime.GC()
		debug.FreeOSMemory()
		time.Sleep(5 * time.Millisecond) // AddCleanup functions run on their own goroutine
		kb := vmRSS(t)
		if prev >= 0 && kb-prev < 256 && prev-kb < 256 {
			return kb
		}
		prev = kb
	}
	return prev
}

func vmRSS(t *testing.T) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb
		}
	}
	t.Skip("no VmRSS in /proc/self/status")
	return 0
}

// bitsHash is a hash of the bit patterns of float32 slices.
func bitsHash(vs ...[]float32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, v := range vs {
		for _, x := range v {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(x))
			h.Write(b[:])
		}
	}
	return h.Sum64()
}

// TestWeightsHeldOnce: a served model (loaded, then Prepack as `hone serve` does) holds its
// weights once, in the dtype it runs: a tied embedding and LM head share one copy (the head's
// pack, from which the embedding's rows are read), and the heap copy of a matrix converted at
// load (a GGUF's quantized matrices dequantized by --dtype f32 or bf16, a safetensors file
// widened or narrowed) goes once its pack holds it (a tied embedding dequantized from a GGUF
// is packed as it is read, never held whole otherwise). So the bytes held for the weights
// (WeightBytes) are the matrices' elements times the dtype's size, the embedding counted once,
// and the process's resident memory grows by that much and no more (within 10% and 2 MiB);
// the logits, the embedding's rows and the weights that training reads (Linear.Dense) are
// bit for bit what they were before Prepack. Rows 256 wide, 8,192 of them in the embedding, so
// that a second copy of it (8 MiB in f32) would show.
func TestWeightsHeldOnce(t *testing.T) {
	o := synth.Tiny("llama")
	o.Layers, o.Hidden, o.Heads, o.KVHeads, o.Intermediate, o.Vocab, o.Tied, o.Std = 3, 256, 4, 2, 512, 8192, true, 0.05
	f32Dir, ggufPath := synthGGUF(t, o, quantizeGGUF(t, func(string) gguf.TensorType { return gguf.Q8_0 }))
	o.DType = "bf16"
	bf16Dir := t.TempDir()
	if err := synth.Write(bf16Dir, o); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		path  string
		dtype model.DType
		elem  int64 // bytes per element; 0: quantized (Q8_0)
	}{
		{"f32", f32Dir, model.DTypeAuto, 4},
		{"bf16", bf16Dir, model.DTypeAuto, 2},
		{"f32-as-bf16", f32Dir, model.DTypeBF16, 2},
		{"bf16-as-f32", bf16Dir, model.DTypeF32, 4},
		{"q8_0", ggufPath, model.DTypeAuto, 0},
		{"q8_0-as-f32", ggufPath, model.DTypeF32, 4},
		{"q8_0-as-bf16", ggufPath, model.DTypeBF16, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			// What the model computes, before Prepack: the logits of greedy decoding, two
			// embedding rows, and two weights as training reads them (Dense).
			prompt := []int{5, 17, 300, 2, 9}
			values := func(m *model.Model) (logits, rows, weights uint64) {
				_, steps := greedy(t, m, prompt, 3)
				H := m.Config.HiddenSize
				r := make([]float32, 2*H)
				m.Embed.Row(r[:H], 1)
				m.Embed.Row(r[H:], m.Config.VocabSize-1)
				q, head := m.Layers[1].Q.Dense(), m.LMHead.Dense()
				return bitsHash(steps...), bitsHash(r), bitsHash(q.Floats(), head.Floats())
			}
			m0, err := model.Load(c.path, model.LoadOptions{DType: c.dtype})
			if err != nil {
				t.Fatal(err)
			}
			logits, rows, weights := values(m0)
			m0.Close()
			m0 = nil

			before := residentKB(t)
			m, err := model.Load(c.path, model.LoadOptions{DType: c.dtype})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if c.path == ggufPath && c.dtype != model.DTypeAuto && (m.Embed.F32 != nil || m.Embed.Half != nil) {
				t.Fatal("the tied embedding dequantized from the GGUF is held in row-major order besides the head's pack")
			}
			m.Prepack()
			if !m.TiedHead() {
				t.Fatal("the head and the embedding are no longer one weight")
			}
			cfg := &m.Config
			H, I, V := int64(cfg.HiddenSize), int64(cfg.IntermediateSize), int64(cfg.VocabSize)
			qd, kvd := int64(cfg.QDim()), int64(cfg.KVDim())
			elems := int64(cfg.NumLayers)*(H*(qd+2*kvd)+qd*H+3*I*H) + V*H
			got, want := m.WeightBytes(), elems*c.elem
			if c.elem == 0 { // Q8_0: 34 bytes a block of 32, packed as the file holds them
				want = elems / 32 * 34
			}
			if got != want {
				t.Fatalf("the weights hold %d bytes, want %d (%d elements)", got, want, elems)
			}
			grew := (residentKB(t) - before) * 1024
			t.Logf("weights %d bytes; resident memory grew by %d", got, grew)
			if grew > want+want/10+2<<20 && !raceEnabled { // the race detector's shadow memory is resident too
				t.Errorf("resident memory grew by %d bytes for %d bytes of weights", grew, want)
			}
			if c.dtype != model.DTypeAuto { // converted at load: heap copies, let go
				for _, l := range []*model.Linear{&m.Layers[0].Q, &m.Layers[2].Down, &m.LMHead} {
					if l.W.F32 != nil || l.W.Half != nil || m.Embed.F32 != nil || m.Embed.Half != nil {
						t.Errorf("a %d×%d heap copy is still held beside its pack", l.W.Rows, l.W.Cols)
					}
				}
			}
			l, r, w := values(m)
			if l != logits || r != rows || w != weights {
				t.Fatalf("after Prepack: logits equal %v, embedding rows %v, weights %v", l == logits, r == rows, w == weights)
			}
			runtime.KeepAlive(m)
		})
	}
}
