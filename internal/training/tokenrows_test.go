package training

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/registry"
)

// TestTrainableTokensSpec: trainable_tokens is auto, on or off, in an SFT job's config and an
// RL job's experimental_config; anything else is a fault naming the field.
func TestTrainableTokensSpec(t *testing.T) {
	for v, want := range map[string]string{`"auto"`: "", `"on"`: TokensOn, `"off"`: TokensOff, `null`: ""} {
		sp, err := NewSFTSpec(SFTRequest{Config: json.RawMessage(`{"trainable_tokens":` + v + `}`)})
		if err != nil || sp.Tokens != want {
			t.Fatalf("SFT %s: %q %v", v, sp.Tokens, err)
		}
		rl, err := parseRLConfig(json.RawMessage(`{"trainable_tokens":` + v + `}`))
		if err != nil || rl.Tokens != want {
			t.Fatalf("RL %s: %q %v", v, rl.Tokens, err)
		}
	}
	_, err := NewSFTSpec(SFTRequest{Config: json.RawMessage(`{"trainable_tokens":"all"}`)})
	faultOf(t, err, fault.KindInvalid, "config.trainable_tokens")
	_, err = parseRLConfig(json.RawMessage(`{"trainable_tokens":"yes"}`))
	faultOf(t, err, fault.KindInvalid, "experimental_config.trainable_tokens")
}

// TestTrainableTokensJobs: an SFT job's trainable_tokens decides the token rows of the
// model's adapter. auto on a model that ends its turns (the tiny random model gives its end
// of turn about a uniform guess) adds none, so its checkpoint is a plain LoRA; on adds rows
// for the template's turn tokens (named in training_started); auto then goes on training the
// rows the adapter has; off keeps them as they are; auto on a model that does not end its
// turns (the threshold raised past the tiny model's probability) adds them.
func TestTrainableTokensJobs(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	up, _ := s.SaveUpload("e", []byte(sftLines))
	run := func(m registry.Model, mode string) (*model.LoRA, []string) {
		t.Helper()
		cfg := `{"learning_rate":0.01,"epochs":2`
		if mode != "" {
			cfg += `,"trainable_tokens":"` + mode + `"`
		}
		j, err := s.CreateSFTJob(ctx, m, SFTRequest{TrainingDataURL: up.URL, Config: json.RawMessage(cfg + `}`)})
		if err != nil {
			t.Fatal(err)
		}
		var tokens []string
		step, err := s.Run(ctx, j, func(typ string, data any) {
			if typ == jobs.EventStarted {
				tokens, _ = data.(map[string]any)["trainable_tokens"].([]string)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		ad, ok, err := s.ResolveAdapter(ctx, "e", fmt.Sprintf("%s/%s/%s:step%d", m.Entity, m.Project, m.Name, *step))
		if err != nil || !ok {
			t.Fatalf("resolve: %v", err)
		}
		return ad.LoRA, tokens
	}
	m, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	if a, toks := run(m, ""); a.HasTokenRows() || toks != nil {
		t.Fatalf("auto on a model that ends its turns: rows %v, event %v", a.HasTokenRows(), toks)
	}
	a2, toks := run(m, TokensOn)
	if !a2.HasTokenRows() || a2.TiedTokens() || !slices.Equal(toks, []string{"<|im_end|>", "<|im_start|>"}) {
		t.Fatalf("on: rows %+v, event %v", a2.EmbedTokens, toks)
	}
	a3, toks := run(m, "")
	if !a3.HasTokenRows() || len(toks) != 2 || slices.Equal(a3.HeadTokens.Rows, a2.HeadTokens.Rows) {
		t.Fatalf("auto after on: the rows did not train (event %v)", toks)
	}
	a4, toks := run(m, TokensOff)
	if toks != nil || !slices.Equal(a4.HeadTokens.Rows, a3.HeadTokens.Rows) || !slices.Equal(a4.EmbedTokens.Rows, a3.EmbedTokens.Rows) ||
		slices.Equal(a4.Layers[0]["q_proj"].B, a3.Layers[0]["q_proj"].B) {
		t.Fatalf("off: the rows moved or the adapter did not (event %v)", toks)
	}
	defer func(v float64) { unlearnedTurnEnd = v }(unlearnedTurnEnd)
	unlearnedTurnEnd = 1e9
	m2, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m2", BaseModel: "tiny"})
	if a, toks := run(m2, ""); !a.HasTokenRows() || len(toks) != 2 {
		t.Fatalf("auto on a model that does not end its turns: rows %v, event %v", a.HasTokenRows(), toks)
	}
}
