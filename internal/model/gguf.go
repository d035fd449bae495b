package model

import (
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/gguf"
	"github.com/honeai/hone/internal/quant"
)

// IsGGUF reports whether path names a GGUF file (by its extension), which Load, and
// tokenizer.Load, read as a whole model.
func IsGGUF(path string) bool { return strings.HasSuffix(strings.ToLower(path), ".gguf") }

// ggufArchKeys are the {arch}.* metadata keys Hone reads. Any other {arch}.* key (an expert
// count, a sliding window, a logit scale, ...) may change the computation, so it is refused
// by name.
var ggufArchKeys = map[string]bool{
	"block_count": true, "context_length": true, "embedding_length": true, "feed_forward_length": true,
	"attention.head_count": true, "attention.head_count_kv": true, "attention.layer_norm_rms_epsilon": true,
	"attention.key_length": true, "attention.value_length": true, "rope.freq_base": true,
	"rope.dimension_count": true, "rope.scaling.type": true, "rope.scaling.factor": true,
	"rope.scaling.original_context_length": true, "vocab_size": true,
}

// ConfigFromGGUF builds a model's Config from a GGUF file's metadata (llama.cpp's keys) and
// its tensor list (biases, tied embeddings). What Hone does not compute is refused by key.
func ConfigFromGGUF(f *gguf.File) (*Config, error) {
	md := f.Metadata
	arch, err := md.String("general.architecture")
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	fam := familyForGGUF(arch)
	if fam == nil {
		return nil, fmt.Errorf("%w %q in %s (general.architecture): Hone runs %s", ErrUnsupported, arch, f.Name, familyList(func(f *Family) []string {
			if f.GGUFArch == "" {
				return nil
			}
			return []string{f.GGUFArch}
		}, true))
	}
	for _, k := range md.Keys() {
		if rest, ok := strings.CutPrefix(k, arch+"."); ok && !ggufArchKeys[rest] && !fam.ggufKeys[rest] {
			return nil, fmt.Errorf("model: %s: metadata key %s is not supported", f.Name, k)
		}
	}
	var firstErr error
	num := func(key string, def int) int {
		v, err := md.Uint(arch + "." + key)
		if errors.Is(err, gguf.ErrNoKey) && def >= 0 {
			return def
		}
		if err == nil && v > math.MaxInt32 {
			err = fmt.Errorf("model: %s: metadata key %s.%s is %d, too large", f.Name, arch, key, v)
		}
		if err != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("model: %w", err)
			}
			return 0
		}
		return int(v)
	}
	// flt reads a float; def < 0 makes the key required.
	flt := func(key string, def float64) float64 {
		v, ok := md.Get(key)
		if !ok {
			if def < 0 && firstErr == nil {
				_, e := md.Float(key)
				firstErr = fmt.Errorf("model: %w", e)
			}
			return def
		}
		if x, ok := v.(float32); ok {
			// The shortest decimal that rounds to this float32 (1e-05, not 9.99999974e-06): what
			// config.json held before conversion.
			d, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
			return d
		}
		d, e := md.Float(key)
		if e != nil && firstErr == nil {
			firstErr = fmt.Errorf("model: %w", e)
		}
		return d
	}
	c := &Config{Arch: fam.Arch, TorchDType: "float32"}
	c.NumLayers = num("block_count", -1)
	c.HiddenSize = num("embedding_length", -1)
	c.IntermediateSize = num("feed_forward_length", -1)
	c.NumHeads = num("attention.head_count", -1)
	c.NumKVHeads = num("attention.head_count_kv", c.NumHeads)
	c.MaxPositionEmbeddings = num("context_length", -1)
	c.RMSNormEps = flt(arch+".attention.layer_norm_rms_epsilon", -1)
	c.RopeTheta = flt(arch+".rope.freq_base", 10000)
	if firstErr != nil {
		return nil, firstErr
	}
	if c.NumHeads > 0 {
		c.HeadDim = num("attention.key_length", c.HiddenSize/c.NumHeads)
	}
	if v := num("attention.value_length", c.HeadDim); v != c.HeadDim {
		return nil, fmt.Errorf("model: %s: %s.attention.value_length %d differs from the key length %d: not supported", f.Name, arch, v, c.HeadDim)
	}
	rotary := num("rope.dimension_count", c.HeadDim)
	if v := rotary; v != c.HeadDim && !fam.ggufPartialRotary {
		return nil, fmt.Errorf("model: %s: %s.rope.dimension_count %d is not the head size %d: Hone rotates the whole head", f.Name, arch, v, c.HeadDim)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	switch kind, err := md.String(arch + ".rope.scaling.type"); {
	case errors.Is(err, gguf.ErrNoKey) || kind == "none":
		if md.Has(arch + ".rope.scaling.factor") {
			if fct := flt(arch+".rope.scaling.factor", 1); fct != 1 && fct != 0 {
				return nil, fmt.Errorf("model: %s: %s.rope.scaling.factor %v without a scaling type is not supported", f.Name, arch, fct)
			}
		}
	case err != nil:
		return nil, fmt.Errorf("model: %w", err)
	case kind == "linear":
		c.RopeScaling = &RopeScaling{Type: "linear", Factor: flt(arch+".rope.scaling.factor", -1)}
		if firstErr != nil {
			return nil, firstErr
		}
	default:
		return nil, fmt.Errorf("model: %s: %s.rope.scaling.type %q is not supported (none, linear)", f.Name, arch, kind)
	}
	// llama.cpp keeps Llama 3.1's RoPE scaling as a tensor of per-frequency divisors.
	if _, ok := f.Tensors[ggufRopeFreqs]; ok {
		if c.RopeFreqFactors, err = ggufRopeFactors(f, c.HeadDim); err != nil {
			return nil, err
		}
	}
	tokens, err := md.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	c.VocabSize = num("vocab_size", len(tokens))
	if firstErr != nil {
		return nil, firstErr
	}
	_, hasOutput := f.Tensors["output.weight"]
	c.TieWordEmbeddings = !hasOutput
	g := &ggufConfig{f: f, flt: flt, num: num, rotary: rotary}
	_, g.hasBias = f.Tensors["blk.0.attn_q.bias"]
	_, g.hasOBias = f.Tensors["blk.0.attn_output.bias"]
	_, g.hasMLPBias = f.Tensors["blk.0.ffn_up.bias"]
	if fam.fromGGUF != nil {
		if err := fam.fromGGUF(g, c); err != nil {
			return nil, err
		}
		if firstErr != nil {
			return nil, firstErr
		}
	}
	ids := func(keys ...string) []int {
		var out []int
		for _, k := range keys {
			if v, err := md.Uint(k); err == nil && v < uint64(len(tokens)) && !containsInt(out, int(v)) {
				out = append(out, int(v))
			}
		}
		return out
	}
	c.BOSTokenID = ids("tokenizer.ggml.bos_token_id")
	// llama.cpp ends generation at EOS, and at the end-of-turn and end-of-message tokens.
	c.EOSTokenID = ids("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id")
	c.Generation.BOSTokenID, c.Generation.EOSTokenID = c.BOSTokenID, c.EOSTokenID
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("%w (from %s)", err, f.Name)
	}
	return c, nil
}

// ggufConfig is what ConfigFromGGUF hands a family's fromGGUF: the file, its metadata readers
// (flt and num as ConfigFromGGUF's: a key's value or the default, def < 0 making it required;
// their errors are returned after fromGGUF), rope.dimension_count (default the head size),
// and which biases the first layer's tensors have.
type ggufConfig struct {
	f                             *gguf.File
	flt                           func(key string, def float64) float64
	num                           func(key string, def int) int
	rotary                        int
	hasBias, hasOBias, hasMLPBias bool // blk.0.attn_q.bias, attn_output.bias, ffn_up.bias
}

// ggufRopeFreqs is the tensor in which llama.cpp's converter stores Llama 3.1's rope_scaling:
// one divisor per rotary frequency.
const ggufRopeFreqs = "rope_freqs.weight"

// ggufRopeFactors reads and checks rope_freqs.weight: headDim/2 finite, positive values.
func ggufRopeFactors(f *gguf.File, headDim int) ([]float64, error) {
	t := f.Tensors[ggufRopeFreqs]
	v, err := f.Float32(ggufRopeFreqs)
	if err != nil {
		return nil, fmt.Errorf("model: %s: tensor %s (type %s) cannot be loaded: %w", f.Name, ggufRopeFreqs, t.Type, err)
	}
	if len(v) != headDim/2 {
		return nil, fmt.Errorf("model: %s: tensor %s has %d values, want head_dim/2 = %d", f.Name, ggufRopeFreqs, len(v), headDim/2)
	}
	out := make([]float64, len(v))
	for i, x := range v {
		d := float64(x)
		if math.IsNaN(d) || math.IsInf(d, 0) || d <= 0 {
			return nil, fmt.Errorf("model: %s: tensor %s value %d is %v: RoPE frequency factors must be finite and positive", f.Name, ggufRopeFreqs, i, x)
		}
		out[i] = d
	}
	return out, nil
}

func containsInt(a []int, x int) bool {
	for _, y := range a {
		if y == x {
			return true
		}
	}
	return false
}

// ggufSource presents a GGUF file's tensors under Hugging Face names: dequantized to f32, or,
// with quantized, the matrices of a type quant.Matrix multiplies (Q8_0, Q4_0, Q4_1, Q5_0,
// Q5_1, Q4_K, Q5_K, Q6_K) as views of the mapped file, packed (and the file's pages dropped)
// with pack.
type ggufSource struct {
	quantized bool
	pack      bool
	fam       *Family
	f         *gguf.File
	hf        map[string]string // Hugging Face name -> GGUF name
	gg        map[string]string // GGUF name -> Hugging Face name
	permut    map[string]int    // HF names whose rows llama.cpp permuted -> heads
}

func newGGUFSource(f *gguf.File, c *Config) *ggufSource {
	s := &ggufSource{fam: c.Family(), f: f, hf: map[string]string{}, gg: map[string]string{}, permut: map[string]int{}}
	add := func(hf, gg string) {
		s.hf[hf], s.gg[gg] = gg, hf
	}
	for hf, gg := range ggufGlobalNames {
		add(hf, gg)
	}
	for i := 0; i < c.NumLayers; i++ {
		for hf := range GGUFLayerNames {
			if !ggufLayerName(s.fam, hf) {
				continue
			}
			name := fmt.Sprintf("model.layers.%d.%s", i, hf)
			gg, _, _ := GGUFTensorName(name)
			add(name, gg)
			// llama.cpp's convert_hf_to_gguf.py reorders the rows of Llama's q and k
			// projections (weights and biases) for its RoPE, which rotates adjacent pairs;
			// Hone rotates halves.
			if heads := GGUFPermutedHeads(c, name); heads > 0 {
				s.permut[name] = heads
			}
		}
		if c.PostNorms {
			for hf := range gemmaGGUFNames {
				name := fmt.Sprintf("model.layers.%d.%s", i, hf)
				gg, _, _ := GGUFTensorNameFor(c, name)
				add(name, gg)
			}
		}
	}
	return s
}

func (s *ggufSource) shape(name string) ([]int, bool) {
	t, ok := s.f.Tensors[s.hf[name]]
	if !ok {
		return nil, false
	}
	return t.Shape(), true
}

func (s *ggufSource) weight(name string, rows, cols int) (Weight, error) {
	gname := s.hf[name]
	t := s.f.Tensors[gname]
	if s.quantized && rows > 1 && quant.Supported(t.Type) {
		raw, err := s.f.Tensor(gname)
		if err != nil {
			return Weight{}, fmt.Errorf("(GGUF tensor %s, type %s) cannot be loaded: %w", gname, t.Type, err)
		}
		q, err := quant.NewMatrix(t.Type, rows, cols, raw)
		if err != nil {
			return Weight{}, fmt.Errorf("(GGUF tensor %s) %w", gname, err)
		}
		// llama.cpp quantized the rows after permuting them, each row on its own (a row is
		// whole blocks): the matrix reads them in Hone's order from the file, no copy.
		if heads, ok := s.permut[name]; ok {
			order, err := unpermuteOrder(rows, heads)
			if err == nil {
				err = q.SetRowOrder(order)
			}
			if err != nil {
				return Weight{}, fmt.Errorf("(GGUF tensor %s) %w", gname, err)
			}
		}
		// The products read the packed copy (where there is one): the file's pages can go.
		if s.pack && q.PackDropping(s.f.DropPages) {
			s.f.DropPages(raw)
		}
		return Weight{Rows: rows, Cols: cols, Q: q}, nil
	}
	v, err := s.f.Float32(gname)
	if err != nil {
		return Weight{}, fmt.Errorf("(GGUF tensor %s, type %s) cannot be loaded: %w", gname, t.Type, err)
	}
	if raw, err := s.f.Tensor(gname); err == nil {
		s.f.DropPages(raw) // v is a copy
	}
	if heads, ok := s.permut[name]; ok {
		pr, pc := rows, cols
		if rows == 1 { // a bias: its elements are the rows
			pr, pc = cols, 1
		}
		if v, err = unpermuteRows(v, pr, pc, heads); err != nil {
			return Weight{}, fmt.Errorf("(GGUF tensor %s) %w", gname, err)
		}
	}
	return Weight{Rows: rows, Cols: cols, F32: v}, nil
}

// unpermuteOrder is llama.cpp's q/k row order undone: Hugging Face row r is GGUF row
// order[r]. Within each head of rows/heads rows, GGUF row 2i+j is Hugging Face row
// j·half+i (j = 0, 1; half = rows/heads/2).
func unpermuteOrder(rows, heads int) ([]int32, error) {
	if heads <= 0 || rows%(2*heads) != 0 {
		return nil, fmt.Errorf("has %d rows, not a multiple of 2×%d heads", rows, heads)
	}
	hd := rows / heads
	half := hd / 2
	order := make([]int32, rows)
	for h := 0; h < heads; h++ {
		for i := 0; i < half; i++ {
			for j := 0; j < 2; j++ {
				order[h*hd+j*half+i] = int32(h*hd + 2*i + j)
			}
		}
	}
	return order, nil
}

// unpermuteRows is v (rows of cols elements) in the order of unpermuteOrder, a copy.
func unpermuteRows(v []float32, rows, cols, heads int) ([]float32, error) {
	order, err := unpermuteOrder(rows, heads)
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(v))
	for r, src := range order {
		copy(out[r*cols:(r+1)*cols], v[int(src)*cols:(int(src)+1)*cols])
	}
	return out, nil
}

func (s *ggufSource) names() []string {
	var out []string
	for _, n := range s.f.Names() {
		if n == ggufRopeFreqs || slices.Contains(s.fam.ggufTensors, n) {
			continue // read into the config by ConfigFromGGUF
		}
		if hf, ok := s.gg[n]; ok {
			out = append(out, hf)
		} else {
			out = append(out, n) // unknown to Hone: the unused-tensor check names it
		}
	}
	return out
}

func (s *ggufSource) Close() error { return s.f.Close() }

// release drops the file's pages of the named tensor, whose data the loader converted into a
// copy (--dtype f32 or bf16): they are not read again.
func (s *ggufSource) release(name string) {
	if raw, err := s.f.Tensor(s.hf[name]); err == nil {
		s.f.DropPages(raw)
	}
}

// LoadGGUF reads a model from a GGUF file: the config from its metadata, the weights as
// follows. With DTypeAuto (the default), matrices of the types quant.Matrix multiplies (Q8_0,
// Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) stay quantized, views of the mapped file (the
// llama q and k projections, whose rows are reordered, are copies), and F32/F16/BF16 tensors
// and the other quantized types (Q2_K, Q3_K) are dequantized to f32. With DTypeF32 every
// weight is dequantized to f32, and with DTypeBF16 to bf16.
func LoadGGUF(path string, opts LoadOptions) (*Model, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	cfg, err := ConfigFromGGUF(f)
	if err != nil {
		f.Close()
		return nil, err
	}
	src := newGGUFSource(f, cfg)
	// Quantized matrices stay quantized (and packed) by default; with --dtype f32 or bf16 they
	// are read as such too and converted a row at a time (LoadOptions.DType), with no f32 copy
	// of a whole tensor on the way to bf16.
	src.quantized, src.pack = true, opts.DType == DTypeAuto
	m, err := fromSource(cfg, src, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	m.Dir = path
	// The model keeps the file mapped for the tensors it views but reads no more metadata:
	// its strings (the vocabulary and merges, megabytes) need not stay on the heap.
	f.Metadata = nil
	if os.Getenv("HONE_BF16_PREFILL") != "0" {
		m.BF16MinRows = 1
	}
	return m, nil
}
