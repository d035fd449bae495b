package synth

import (
	"errors"
	"fmt"
)

// qwen3MoEArch is Qwen3-MoE (Qwen3MoeForCausalLM): Qwen3's attention (q/k norms, head_dim 32
// in Tiny), routed experts on the sparse layers.
var qwen3MoEArch = archSpec{
	name: "qwen3moe", class: "Qwen3MoeForCausalLM", modelType: "qwen3_moe",
	tiny:       func(o *Options) { o.HeadDim = 32 },
	ownHeadDim: true,
	qkNorm:     true,
	experts:    true,
	config:     moeConfig,
}

// moeDefaults fills the expert options of a qwen3moe model: 8 experts, 2 per token, experts
// of width 32, normalised top-k weights (as Qwen3-MoE's released models).
func moeDefaults(o *Options) {
	if a := o.arch(); a == nil || !a.experts {
		return
	}
	if o.Experts == 0 {
		o.Experts = 8
	}
	if o.ExpertsPerTok == 0 {
		o.ExpertsPerTok = min(2, o.Experts)
	}
	if o.MoEIntermediate == 0 {
		o.MoEIntermediate = 32
	}
}

func (o *Options) checkMoE() error {
	if !o.arch().experts {
		if o.Experts != 0 || o.ExpertsPerTok != 0 || o.MoEIntermediate != 0 || o.MLPOnlyLayers != nil || o.DenseTopK {
			return errors.New("synth: expert options are only offered for qwen3moe")
		}
		return nil
	}
	switch {
	case o.Experts < 1 || o.ExpertsPerTok < 1 || o.ExpertsPerTok > o.Experts || o.MoEIntermediate < 1:
		return fmt.Errorf("synth: experts %d, experts per token %d, moe intermediate %d: want 1 ≤ per token ≤ experts and a positive width", o.Experts, o.ExpertsPerTok, o.MoEIntermediate)
	}
	for _, l := range o.MLPOnlyLayers {
		if l < 0 || l >= o.Layers {
			return fmt.Errorf("synth: mlp-only layer %d is not one of the %d layers", l, o.Layers)
		}
	}
	return nil
}

// sparse reports whether layer l of a qwen3moe model has routed experts.
func (o *Options) sparse(l int) bool {
	if !o.arch().experts {
		return false
	}
	for _, d := range o.MLPOnlyLayers {
		if d == l {
			return false
		}
	}
	return true
}

// moeConfig adds Qwen3MoeConfig's fields to config.json.
func moeConfig(o *Options, c map[string]any) {
	c["attention_bias"] = false
	c["use_sliding_window"] = false
	c["sliding_window"] = nil
	c["rope_scaling"] = nil
	c["num_experts"] = o.Experts
	c["num_experts_per_tok"] = o.ExpertsPerTok
	c["moe_intermediate_size"] = o.MoEIntermediate
	c["norm_topk_prob"] = !o.DenseTopK
	c["decoder_sparse_step"] = 1
	mlpOnly := o.MLPOnlyLayers
	if mlpOnly == nil {
		mlpOnly = []int{}
	}
	c["mlp_only_layers"] = mlpOnly
	c["output_router_logits"] = false
	c["router_aux_loss_coef"] = 0.001
}

// moeWeights adds a sparse layer's router and experts, one expert at a time in Hugging Face's
// checkpoint layout (mlp.experts.E.{gate,up,down}_proj.weight).
func moeWeights(o *Options, p string, add func(string, []int, func() float64), normal, deep func() float64) {
	add(p+"mlp.gate.weight", []int{o.Experts, o.Hidden}, normal)
	for e := 0; e < o.Experts; e++ {
		q := fmt.Sprintf("%smlp.experts.%d.", p, e)
		add(q+"gate_proj.weight", []int{o.MoEIntermediate, o.Hidden}, normal)
		add(q+"up_proj.weight", []int{o.MoEIntermediate, o.Hidden}, normal)
		add(q+"down_proj.weight", []int{o.Hidden, o.MoEIntermediate}, deep)
	}
}
