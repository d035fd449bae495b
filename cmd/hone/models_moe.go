package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/synth"
)

// moeSynthFlags defines `hone models synth`'s expert flags (qwen3moe) and returns the
// function that applies those given explicitly to the options.
func moeSynthFlags(fs *flag.FlagSet) func(o *synth.Options, set map[string]bool) error {
	experts := fs.Int("experts", 0, "qwen3moe: routed experts per sparse layer (num_experts)")
	perTok := fs.Int("experts-per-tok", 0, "qwen3moe: experts per token (num_experts_per_tok)")
	moeInter := fs.Int("moe-intermediate", 0, "qwen3moe: each expert's intermediate size")
	noNorm := fs.Bool("no-norm-topk", false, "qwen3moe: norm_topk_prob false (top-k weights not renormalised)")
	mlpOnly := fs.String("mlp-only-layers", "", "qwen3moe: comma-separated layers with a dense MLP (mlp_only_layers)")
	return func(o *synth.Options, set map[string]bool) error {
		if set["experts"] {
			o.Experts = *experts
		}
		if set["experts-per-tok"] {
			o.ExpertsPerTok = *perTok
		}
		if set["moe-intermediate"] {
			o.MoEIntermediate = *moeInter
		}
		if set["no-norm-topk"] {
			o.DenseTopK = *noNorm
		}
		if set["mlp-only-layers"] {
			o.MLPOnlyLayers = []int{}
			for _, s := range strings.Split(*mlpOnly, ",") {
				if s = strings.TrimSpace(s); s == "" {
					continue
				}
				l, err := strconv.Atoi(s)
				if err != nil {
					return fmt.Errorf("--mlp-only-layers: %q is not a layer index", s)
				}
				o.MLPOnlyLayers = append(o.MLPOnlyLayers, l)
			}
		}
		return nil
	}
}
