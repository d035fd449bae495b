package training

import (
	"encoding/json"
	"testing"

	"github.com/honeai/hone/internal/fault"
)

// TestHyperparameterBounds: values that can only make training diverge are refused when the
// job is created, by a 400 naming the field.
func TestHyperparameterBounds(t *testing.T) {
	group := []json.RawMessage{json.RawMessage(`{"trajectories":[{"messages_and_choices":[{"role":"user","content":"hi"},{"role":"assistant","content":"a"}],"reward":1}]}`)}
	for _, tc := range []struct {
		kind, config, experimental, field string
	}{
		{"sft", `{"learning_rate":1e308}`, ``, "config.learning_rate"},
		{"sft", `{"learning_rate":[1e-4,2]}`, ``, "config.learning_rate"},
		{"sft", `{"learning_rate":0}`, ``, "config.learning_rate"},
		{"sft", `{"batch_size":100000}`, ``, "config.batch_size"},
		{"sft", `{"epochs":0}`, ``, "config.epochs"},
		{"sft", ``, `{"weight_decay":1e308}`, "experimental_config.weight_decay"},
		{"sft", ``, `{"weight_decay":-1e308}`, "experimental_config.weight_decay"},
		{"sft", ``, `{"max_grad_norm":1e308}`, "experimental_config.max_grad_norm"},
		{"sft", ``, `{"warmup_steps":-1}`, "experimental_config.warmup_steps"},
		{"sft", ``, `{"max_seq_len":100000000}`, "experimental_config.max_seq_len"},
		{"rl", ``, `{"learning_rate":1e308}`, "experimental_config.learning_rate"},
		{"rl", ``, `{"learning_rate":1.5}`, "experimental_config.learning_rate"},
		{"rl", ``, `{"weight_decay":1e308}`, "experimental_config.weight_decay"},
		{"rl", ``, `{"weight_decay":-1e308}`, "experimental_config.weight_decay"},
		{"rl", ``, `{"weight_decay":2}`, "experimental_config.weight_decay"},
		{"rl", ``, `{"max_grad_norm":1e308}`, "experimental_config.max_grad_norm"},
		{"rl", ``, `{"kl_penalty_coef":1e300}`, "experimental_config.kl_penalty_coef"},
		{"rl", ``, `{"num_trajectories_learning_rate_multiplier_power":50}`, "experimental_config.num_trajectories_learning_rate_multiplier_power"},
	} {
		var err error
		if tc.kind == "sft" {
			_, err = NewSFTSpec(SFTRequest{Config: json.RawMessage(tc.config), ExperimentalConfig: json.RawMessage(tc.experimental)})
		} else {
			_, err = NewRLSpec(RLRequest{TrajectoryGroups: group, ExperimentalConfig: json.RawMessage(tc.experimental)})
		}
		f, ok := fault.As(err)
		if !ok || f.Kind != fault.KindInvalid || f.Field != tc.field {
			t.Errorf("%s %s %s: %v (want a 400 naming %s)", tc.kind, tc.config, tc.experimental, err, tc.field)
		}
	}
	// Values at the bounds are accepted.
	if _, err := NewSFTSpec(SFTRequest{Config: json.RawMessage(`{"learning_rate":1,"batch_size":1024,"epochs":1000}`),
		ExperimentalConfig: json.RawMessage(`{"weight_decay":1,"max_grad_norm":-1,"warmup_steps":10}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := NewRLSpec(RLRequest{TrajectoryGroups: group, ExperimentalConfig: json.RawMessage(`{"learning_rate":1,"weight_decay":0.1,"max_grad_norm":1}`)}); err != nil {
		t.Fatal(err)
	}
}
