package training

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/wandb"
)

// loraVersions lists the step aliases of a collection's lora versions, and the version
// holding "latest".
func loraVersions(t *testing.T, w *wandb.Service, m registry.Model) ([]string, string) {
	t.Helper()
	vs, err := w.Versions(context.Background(), m.Entity, m.Project, m.Name, "lora")
	if err != nil {
		t.Fatal(err)
	}
	var steps []string
	latest := ""
	for _, v := range vs {
		for _, a := range v.Aliases {
			if strings.HasPrefix(a, "step") {
				steps = append(steps, a)
			}
		}
		for _, a := range v.Aliases {
			if a == "latest" {
				latest = strings.Join(v.Aliases, ",")
			}
		}
	}
	sort.Strings(steps)
	return steps, latest
}

// TestLoRAArtifacts: each checkpoint a job makes is a W&B lora artifact of the model's
// collection (alias step<N>, the newest "latest"); deleted checkpoints take their versions
// with them; checkpoints made without publishing are published by SyncAllLoRA; a version a
// client logged into another model's collection with a step alias above its checkpoints (a
// fork) becomes its checkpoint when its next job starts, which trains on from it; one whose
// adapter does not fit the base model is left out with the job training as before.
func TestLoRAArtifacts(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	w, err := wandb.Open(ctx, dbtest.SQLite(t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	up, _ := s.SaveUpload("e", []byte(sftLines))
	train := func(m registry.Model) int {
		t.Helper()
		j, err := s.CreateSFTJob(ctx, m, SFTRequest{TrainingDataURL: up.URL, Config: json.RawMessage(`{"learning_rate":0.01}`)})
		if err != nil {
			t.Fatal(err)
		}
		step, err := s.Run(ctx, j, func(string, any) {})
		if err != nil {
			t.Fatal(err)
		}
		return *step
	}
	train(m) // step 1, made before publishing: SyncAllLoRA publishes it
	s.LoRA = w
	if steps, _ := loraVersions(t, w, m); len(steps) != 0 {
		t.Fatalf("published before LoRA was set: %v", steps)
	}
	if err := s.SyncAllLoRA(ctx); err != nil {
		t.Fatal(err)
	}
	train(m)
	train(m)
	if steps, latest := loraVersions(t, w, m); strings.Join(steps, " ") != "step1 step2 step3" || latest != "latest,step3" {
		t.Fatalf("versions %v, latest %q", steps, latest)
	}
	a, err := w.ArtifactByName(ctx, "e", "p", "m", "step2")
	if err != nil {
		t.Fatal(err)
	}
	files, err := w.LocalFiles(ctx, a)
	if err != nil || len(files) != 2 || files["adapter_model.safetensors"] == "" || files["adapter_config.json"] == "" {
		t.Fatalf("files %v %v", files, err)
	}
	dir, _ := s.Reg.CheckpointPath(ctx, m.ID, 2)
	want, _ := os.ReadFile(filepath.Join(dir, "adapter_model.safetensors"))
	if got, _ := os.ReadFile(files["adapter_model.safetensors"]); string(got) != string(want) {
		t.Fatal("the published adapter is not the checkpoint's")
	}
	if _, _, err := s.DeleteCheckpoints(ctx, m, []int{1}); err != nil {
		t.Fatal(err)
	}
	if steps, _ := loraVersions(t, w, m); strings.Join(steps, " ") != "step2 step3" {
		t.Fatalf("after deleting step 1: %v", steps)
	}

	// A fork: step 2's adapter logged by a client into another model's collection as step7.
	f, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "f", BaseModel: "tiny"})
	if _, err := w.Publish(ctx, wandb.PublishInput{Entity: "e", Project: "p", Type: "lora", Collection: "f",
		Files: []wandb.PublishFile{{Name: "adapter_model.safetensors", Path: files["adapter_model.safetensors"]},
			{Name: "adapter_config.json", Path: files["adapter_config.json"]}},
		Metadata: map[string]any{"wandb.provenance": []string{"serverless-rl"}}, Aliases: []string{"step7"}, Latest: true}); err != nil {
		t.Fatal(err)
	}
	if step := train(f); step != 8 {
		t.Fatalf("the forked model trained to step %d, not 8", step)
	}
	imported, err := s.Reg.CheckpointPath(ctx, f.ID, 7)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(imported, "adapter_model.safetensors")); string(got) != string(want) {
		t.Fatal("checkpoint 7 is not the forked adapter")
	}
	if steps, latest := loraVersions(t, w, f); strings.Join(steps, " ") != "step7 step8" || latest != "latest,step8" {
		t.Fatalf("fork versions %v, latest %q", steps, latest)
	}
	v7, _ := w.ArtifactByName(ctx, "e", "p", "f", "step7")
	if !strings.Contains(v7.Metadata, `"wandb.provenance":["serverless-rl"]`) || !strings.Contains(v7.Metadata, `"hone_checkpoint_id"`) {
		t.Fatalf("the forked version's metadata: %s", v7.Metadata)
	}

	// A version whose files are no adapter of the base model is left out.
	g, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "g", BaseModel: "tiny"})
	bad := filepath.Join(t.TempDir(), "adapter_model.safetensors")
	os.WriteFile(bad, []byte("not safetensors"), 0o644)
	if _, err := w.Publish(ctx, wandb.PublishInput{Entity: "e", Project: "p", Type: "lora", Collection: "g",
		Files:   []wandb.PublishFile{{Name: "adapter_model.safetensors", Path: bad}, {Name: "adapter_config.json", Path: files["adapter_config.json"]}},
		Aliases: []string{"step5"}, Latest: true}); err != nil {
		t.Fatal(err)
	}
	if step := train(g); step != 1 {
		t.Fatalf("a model with a broken forked version trained to step %d, not 1", step)
	}
	if v, _ := w.ArtifactByName(ctx, "e", "p", "g", "step5"); !strings.Contains(v.Metadata, `"hone_import_error":"the lora artifact g:v0 (step5) is not taken as a checkpoint`) {
		t.Fatalf("the broken version's metadata: %s", v.Metadata)
	}

	// The model deleted: its versions go.
	if _, err := s.DeleteModel(ctx, m); err != nil {
		t.Fatal(err)
	}
	if steps, _ := loraVersions(t, w, m); len(steps) != 0 {
		t.Fatalf("after deleting the model: %v", steps)
	}
}
