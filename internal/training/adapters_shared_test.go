package training

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/blob"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/train"
)

// Two nodes on one PostgreSQL: B serves a checkpoint A's registry stored, with A's directory
// gone; after the step is deleted and written again through A, B serves the new adapter, not
// the one it had cached under the same model and step.
func TestAdapterCacheAcrossNodes(t *testing.T) {
	d := dbtest.Postgres(t)
	ctx := context.Background()
	remote := blob.NewDB(d)
	if err := remote.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	mdir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(mdir, synth.Tiny("llama")); err != nil {
		t.Fatal(err)
	}
	base, err := serving.Load("tiny", mdir, serving.LoadOptions{NoEngine: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(base.Close)
	models := serving.NewModels()
	models.Add(base)
	node := func() (*Service, string) {
		dir := t.TempDir()
		reg, err := registry.New(ctx, d, filepath.Join(dir, "checkpoints"))
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.UseBlobs(ctx, &blob.Cache{Remote: remote, Dir: blob.Dir{Root: filepath.Join(dir, "cache", "blobs")}}, filepath.Join(dir, "cache")); err != nil {
			t.Fatal(err)
		}
		q, err := jobs.Open(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return &Service{Reg: reg, Queue: q, Models: models}, dir
	}
	a, dirA := node()
	b, _ := node()
	m, err := a.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	write := func(seed uint64) float32 {
		t.Helper()
		lora, err := train.NewLoRA(&base.Model.Config, train.LoRAConfig{Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		if err := train.SaveCheckpoint(a.Reg.CheckpointDir(m.ID, 1), lora, train.Checkpoint{BaseModel: "tiny"}); err != nil {
			t.Fatal(err)
		}
		if _, err := a.Reg.AddCheckpoint(ctx, m.ID, 1, nil); err != nil {
			t.Fatal(err)
		}
		return lora.Layers[0]["q_proj"].A[0]
	}
	first := write(1)
	if err := os.RemoveAll(dirA); err != nil {
		t.Fatal(err)
	}
	got1, ok, err := b.ResolveAdapter(ctx, "e", "e/p/m:step1")
	if err != nil || !ok || got1.LoRA.Layers[0]["q_proj"].A[0] != first {
		t.Fatalf("step 1 on B: %v %v", ok, err)
	}
	if _, _, err := a.DeleteCheckpoints(ctx, m, []int{1}); err != nil {
		t.Fatal(err)
	}
	second := write(2)
	if second == first {
		t.Fatal("the two adapters are alike")
	}
	got2, ok, err := b.ResolveAdapter(ctx, "e", "e/p/m:step1")
	if err != nil || !ok || got2.LoRA == got1.LoRA || got2.LoRA.Layers[0]["q_proj"].A[0] != second {
		t.Fatalf("step 1 written again, on B: %v %v (the cached adapter answered: %v)", ok, err, got2.LoRA == got1.LoRA)
	}
}
