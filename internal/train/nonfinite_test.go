package train

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/trainingdata"
)

// TestDivergedTrainingStops: SFT with a learning rate or weight decay of ±1e308 stops at its
// first step with ErrDiverged naming the step (the step's metrics still reported), an RL
// step likewise, and SaveCheckpoint refuses the non-finite adapter left behind.
func TestDivergedTrainingStops(t *testing.T) {
	_, m, c, xs := tinySFT(t, "llama")
	for _, tc := range []struct {
		name   string
		lr, wd float64
	}{{"learning_rate", 1e308, 0}, {"weight_decay", 1e-3, 1e308}, {"negative weight_decay", 1e-3, -1e308}} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 1})
			e, _ := NewTrainer(m, a)
			plan, err := PlanSFT(xs, SFTConfig{Epochs: 3, BatchSize: 1, LearningRates: []float64{tc.lr}, WeightDecay: tc.wd, MaxSeqLen: 512})
			if err != nil {
				t.Fatal(err)
			}
			var reported []StepMetrics
			_, err = RunSFT(context.Background(), e, plan, nil, func(s StepMetrics) error { reported = append(reported, s); return nil })
			if !errors.Is(err, ErrDiverged) || !strings.HasPrefix(err.Error(), "step ") {
				t.Fatalf("err = %v", err)
			}
			if len(reported) == 0 || !strings.HasPrefix(err.Error(), "step "+strconv.Itoa(reported[len(reported)-1].Step)+":") {
				t.Fatalf("the diverged step was not reported (%d steps) or not named: %v", len(reported), err)
			}
			ck := filepath.Join(t.TempDir(), "step1")
			if err := SaveCheckpoint(ck, a, Checkpoint{}); !errors.Is(err, ErrDiverged) {
				t.Fatalf("SaveCheckpoint of a non-finite adapter: %v", err)
			}
			if _, err := os.Stat(ck); !os.IsNotExist(err) {
				t.Fatalf("a non-finite checkpoint was written: %v", err)
			}
		})
	}

	// RL: one step at learning rate 1e308.
	a, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 1})
	e, _ := NewTrainer(m, a)
	user := json.RawMessage(`{"role":"user","content":"Say something"}`)
	var g trainingdata.TrajectoryGroup
	for i, ids := range [][]int{{100, 101}, {102, 103}} {
		g.Trajectories = append(g.Trajectories, trainingdata.Trajectory{Reward: float64(i),
			MessagesAndChoices: []json.RawMessage{user, choiceJSON(c, ids, []float32{-1, -2})}})
	}
	_, _, err := RLStep(context.Background(), e, c, []trainingdata.TrajectoryGroup{g}, RLConfig{Loss: "cispo", LearningRate: 1e308, ScaleRewards: true}, nil)
	if !errors.Is(err, ErrDiverged) {
		t.Fatalf("RL step at learning rate 1e308: %v", err)
	}
	// A finite adapter passes the check.
	b, _ := NewLoRA(&m.Config, LoRAConfig{Rank: 4, Alpha: 8, Seed: 1})
	if err := CheckFinite(b); err != nil {
		t.Fatal(err)
	}
	if err := checkGradStep(math.NaN(), 1); err == nil || !strings.Contains(err.Error(), "loss is NaN") {
		t.Fatalf("NaN loss: %v", err)
	}
}
