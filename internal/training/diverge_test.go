package training

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/train"
)

// TestDivergedJobFails: an SFT or RL job whose training diverges (a learning rate of 1e308,
// queued as an older Hone accepted it) fails with a message naming the step, reports the
// step, and saves no checkpoint; a non-finite checkpoint already on disk is refused by chat
// with a fault naming it, never served.
func TestDivergedJobFails(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	m, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	up, _ := s.SaveUpload("e", []byte(sftLines))

	sft := &SFTSpec{DataURL: up.URL, Config: train.SFTConfig{LearningRates: []float64{1e308}, MaxSeqLen: 512}, Turns: "all"}
	j, err := s.Queue.Enqueue(ctx, m.ID, "e", "sft", queued{Version: 1, SFT: sft})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	_, err = s.Run(ctx, j, func(typ string, _ any) { events = append(events, typ) })
	if err == nil || !strings.HasPrefix(err.Error(), "step 1: training diverged") || !strings.Contains(err.Error(), "no checkpoint was saved") {
		t.Fatalf("sft: %v", err)
	}
	if len(events) != 2 || events[1] != "gradient_step" {
		t.Fatalf("sft events %v", events)
	}

	choice := func(id int) string {
		return fmt.Sprintf(`{"index":0,"finish_reason":"length","token_ids":[%d],"message":{"role":"assistant","content":"x"},"logprobs":{"content":[{"token":"token_id:%d","logprob":-1,"bytes":[]}]}}`, id, id)
	}
	groups := []json.RawMessage{json.RawMessage(`{"trajectories":[
		{"messages_and_choices":[{"role":"user","content":"hi"},` + choice(100) + `],"reward":1},
		{"messages_and_choices":[{"role":"user","content":"hi"},` + choice(101) + `],"reward":0}]}`)}
	rl, err := NewRLSpec(RLRequest{TrajectoryGroups: groups})
	if err != nil {
		t.Fatal(err)
	}
	rl.Config.LearningRate = 1e308
	j, _ = s.Queue.Enqueue(ctx, m.ID, "e", "rl", queued{Version: 1, RL: &rl})
	events = nil
	_, err = s.Run(ctx, j, func(typ string, _ any) { events = append(events, typ) })
	if err == nil || !strings.HasPrefix(err.Error(), "step 1: ") || !strings.Contains(err.Error(), "training diverged") {
		t.Fatalf("rl: %v", err)
	}
	if events[len(events)-1] != "gradient_step" {
		t.Fatalf("rl events %v", events)
	}
	if _, err := s.Reg.Latest(ctx, m.ID); !errors.Is(err, registry.ErrNotFound) {
		t.Fatalf("a diverged job left a checkpoint: %v", err)
	}

	// A checkpoint made non-finite on disk is refused by name.
	j, _ = s.CreateSFTJob(ctx, m, SFTRequest{TrainingDataURL: up.URL})
	if _, err := s.Run(ctx, j, func(string, any) {}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(s.Reg.CheckpointDir(m.ID, 1), "adapter_model.safetensors")
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for i, name := range f.Names() {
		tn, _ := f.Tensor(name)
		v, _ := tn.F32()
		v = append([]float32(nil), v...)
		if i == 0 {
			v[0] = float32(math.NaN())
		}
		ts = append(ts, safetensors.FromF32(name, tn.Shape, v))
	}
	f.Close()
	if err := safetensors.Write(path, ts, nil); err != nil {
		t.Fatal(err)
	}
	_, _, err = s.ResolveAdapter(ctx, "e", "e/p/m:step1")
	faultOf(t, err, fault.KindInvalid, "model")
	if !strings.Contains(err.Error(), "step 1") || !strings.Contains(err.Error(), "not finite") {
		t.Fatalf("resolve: %v", err)
	}
}
