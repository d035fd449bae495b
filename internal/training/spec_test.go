package training

import (
	"encoding/json"
	"math"
	"testing"
)

// TestParseRLConfigART: the experimental_config ART's backend.train sends with its defaults
// is the trainer's default; each option reaches the trainer.
func TestParseRLConfigART(t *testing.T) {
	defaults := `{"advantage_balance":0.0,"allow_training_without_logprobs":false,"epsilon":null,"epsilon_high":null,
"importance_sampling_level":"token","kimi_k2_tau":null,"kl_penalty_coef":0.0,"kl_penalty_reference_step":null,
"kl_penalty_source":"current_learner","kl_penalty_step_lag":null,"kl_ref_adapter_path":null,"learning_rate":5e-06,
"logprob_calculation_chunk_size":1024,"loss_fn":"cispo","mask_prob_ratio":false,
"max_negative_advantage_importance_sampling_weight":null,"normalize_advantages":true,
"num_trajectories_learning_rate_multiplier_power":0.0,"packed_sequence_length":null,"plot_tensors":false,"ppo":false,
"precalculate_logprobs":false,"scale_learning_rate_by_reward_std_dev":false,"scale_rewards":true,
"truncated_importance_sampling":null}`
	p, err := parseRLConfig(json.RawMessage(defaults))
	if err != nil {
		t.Fatal(err)
	}
	c := p.Config
	if c.Loss != "cispo" || !c.ScaleRewards || c.LearningRate != 5e-6 || c.KLPenaltySource != "current_learner" || c.AdvantageBalance != 0 ||
		c.MaskProbRatio || c.KimiK2Tau != 0 || c.TruncatedIS != 0 || c.NumTrajectoriesLRPower != 0 || p.ScaleLRByStd || p.KLRefStep != nil || p.KLStepLag != nil {
		t.Fatalf("ART defaults gave %+v", p)
	}
	p, err = parseRLConfig(json.RawMessage(`{"ppo":true,"advantage_balance":-0.5,"importance_sampling_level":"average","mask_prob_ratio":true,"kimi_k2_tau":0.2,
"truncated_importance_sampling":3,"kl_penalty_coef":0.1,"kl_penalty_source":"sample","kl_penalty_step_lag":2,"normalize_advantages":false,
"num_trajectories_learning_rate_multiplier_power":0.5,"scale_learning_rate_by_reward_std_dev":true,"packed_sequence_length":512}`))
	if err != nil {
		t.Fatal(err)
	}
	c = p.Config
	if c.Loss != "ppo" || c.ScaleRewards || c.AdvantageBalance != -0.5 || c.ImportanceSampling != "average" || !c.MaskProbRatio || c.KimiK2Tau != 0.2 ||
		c.TruncatedIS != 3 || c.KLPenaltyCoef != 0.1 || c.KLPenaltySource != "sample" || *p.KLStepLag != 2 || c.NumTrajectoriesLRPower != 0.5 || !p.ScaleLRByStd || c.MaxSeqLen != 512 {
		t.Fatalf("options gave %+v", p)
	}
}

func TestFitLine(t *testing.T) {
	m, b, ok := fitLine([]float64{0, 1, 2, 3}, []float64{1, 0.9, 0.8, 0.7})
	if !ok || math.Abs(m+0.1) > 1e-9 || math.Abs(b-1) > 1e-9 {
		t.Fatalf("%v %v %v", m, b, ok)
	}
	if _, _, ok := fitLine([]float64{2, 2}, []float64{1, 3}); ok {
		t.Fatal("a line through one x")
	}
}
