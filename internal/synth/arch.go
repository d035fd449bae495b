package synth

// archSpec is what synth writes differently for one architecture: config.json's names and
// fields, Tiny's defaults, the options it checks, and its layers' tensors. Each is in the
// architecture's file (llama.go, qwen.go, moe.go, phi3.go, mistral.go, gemma.go) and listed in
// archs; a new architecture is such a file and an entry there (docs/architecture.md, "Adding
// a model family").
type archSpec struct {
	name string // Options.Arch
	// class and modelType are config.json's architectures entry and model_type.
	class, modelType string
	// tiny changes Tiny's options for the architecture (nil: none).
	tiny func(o *Options)
	// ownHeadDim: head_dim is the architecture's own (Qwen3, Mistral, Gemma): Tiny's is kept
	// for Tiny's shape, and hidden need not be heads × head_dim.
	ownHeadDim bool
	// check validates the architecture's own options (nil: none); without one, a RoPE scaling
	// is refused unless llama3Rope offers llama3's.
	check      func(o *Options) error
	llama3Rope bool
	// experts: the expert options (moe.go) apply.
	experts bool
	// config adds the architecture's fields to config.json.
	config func(o *Options, c map[string]any)
	// layer adds layer p's tensors (nil: Llama's layer, with q/k/v biases where qkvBias and
	// q/k norms where qkNorm, and experts on the sparse layers).
	layer           func(o *Options, p string, add func(string, []int, func() float64), normal, norm, deep func() float64)
	qkvBias, qkNorm bool
	// normPlusOne: norm weights scale by 1 + weight (Gemma): the final norm's are drawn near
	// zero.
	normPlusOne bool
}

// archs are the architectures synth writes, in the order its messages list them.
var archs = []*archSpec{&llamaArch, &qwen2Arch, &qwen3Arch, &qwen3MoEArch, &phi3Arch, &mistralArch, &ministralArch, &gemma2Arch, &gemma3Arch}

// archOf returns the architecture named arch, or nil.
func archOf(arch string) *archSpec {
	for _, a := range archs {
		if a.name == arch {
			return a
		}
	}
	return nil
}

// archList lists the architectures' names: "a, b or c".
func archList() string {
	s := ""
	for i, a := range archs {
		switch {
		case i == 0:
		case i == len(archs)-1:
			s += " or "
		default:
			s += ", "
		}
		s += a.name
	}
	return s
}
