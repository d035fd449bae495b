package training

import (
	"context"
	"encoding/json"
	"os"
	"sync"
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/train"
)

// TestResolveWhileCheckpointsChange: chat resolves `:latest` while training writes new
// checkpoints and ART's delete_checkpoints prunes the older ones. A checkpoint that is pruned
// between finding it and reading its files is not an error: the resolver looks again.
func TestResolveWhileCheckpointsChange(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	m, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	up, _ := s.SaveUpload("e", []byte(sftLines))
	j, err := s.CreateSFTJob(ctx, m, SFTRequest{TrainingDataURL: up.URL, Config: json.RawMessage(`{"learning_rate":0.01}`)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Run(ctx, j, func(string, any) {}); err != nil {
		t.Fatal(err)
	}
	base, _ := s.Models.Get("tiny")
	a, err := model.LoadLoRA(s.Reg.CheckpointDir(m.ID, 1), &base.Model.Config)
	if err != nil {
		t.Fatal(err)
	}
	const steps = 60
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() { // the trainer: write step n, then prune step n-1
		defer wg.Done()
		defer close(done)
		for n := 2; n <= steps; n++ {
			if err := train.SaveCheckpoint(s.Reg.CheckpointDir(m.ID, n), a, train.Checkpoint{BaseModel: "tiny"}); err != nil {
				t.Error(err)
				return
			}
			if _, err := s.Reg.AddCheckpoint(ctx, m.ID, n, nil); err != nil {
				t.Error(err)
				return
			}
			if _, _, err := s.DeleteCheckpoints(ctx, m, []int{n - 1}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	resolved := 0
	for i := 0; ; i++ {
		select {
		case <-done:
			wg.Wait()
			if resolved == 0 {
				t.Fatal("nothing resolved")
			}
			return
		default:
		}
		name := "e/p/m"
		if i%2 == 1 {
			name = "e/p/m:latest"
		}
		ad, ok, err := s.ResolveAdapter(ctx, "e", name)
		if err != nil || !ok || ad.LoRA == nil {
			t.Errorf("resolve %d of %s while checkpoints change: %+v %v %v", i, name, ad, ok, err)
			<-done // the trainer's store must outlive it
			wg.Wait()
			return
		}
		resolved++
		if i%4 == 0 {
			s.forget(m.ID) // read the files again, as a node that has not cached them would
		}
	}
}

// TestDeleteUnknownStepKeepsItsFiles: deleting a step that is not registered (yet) must not
// remove its directory: the trainer may have just renamed it into place and be about to
// register it.
func TestDeleteUnknownStepKeepsItsFiles(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	m, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	dir := s.Reg.CheckpointDir(m.ID, 3)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, missing, err := s.DeleteCheckpoints(ctx, m, []int{3})
	if err != nil || len(missing) != 1 {
		t.Fatalf("missing %v err %v", missing, err)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the unregistered step's directory was removed: %v", err)
	}
}
