package training

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/safetensors"
	"github.com/honeai/hone/internal/train"
	"github.com/honeai/hone/internal/wandb"
)

// W&B Training keeps a model's checkpoints as "lora" artifacts: the collection is the model's
// name in its project, each version holds the PEFT adapter with the alias step<N> (and the
// newest "latest"). ART's client and the wandb SDK read them there: the serverless backend's
// train result names "<entity>/<project>/<model>:step<N>", _experimental_pull_model_checkpoint
// downloads it, ART records provenance in the latest version's metadata, and
// _experimental_fork_checkpoint reads another model's versions and logs one into this model's
// collection. SyncLoRA keeps Hone's checkpoints and such a collection in step:
//   - every checkpoint is published as a version (adapter_model.safetensors and
//     adapter_config.json; metadata hone_checkpoint_id, step, base_model, metrics), the newest
//     with "latest";
//   - a version Hone published whose checkpoint is gone (deleted, pruned, the model deleted)
//     is deleted;
//   - a version logged by a client with a step<N> alias above the model's latest checkpoint
//     (a fork) becomes checkpoint N when the model's next job starts, as W&B Training takes
//     it up at the next training step: its adapter must fit the base model.

// LoRAArtifacts is the W&B artifact store the checkpoints are published in (wandb.Service).
type LoRAArtifacts interface {
	Publish(ctx context.Context, in wandb.PublishInput) (wandb.Artifact, error)
	Versions(ctx context.Context, entity, project, collection, typ string) ([]wandb.Artifact, error)
	DeleteVersion(ctx context.Context, entity, id string) error
	UpdateArtifact(ctx context.Context, entity, id string, metadata, description *string, aliases []string) (wandb.Artifact, error)
	LocalFiles(ctx context.Context, a wandb.Artifact) (map[string]string, error)
}

// loraType is W&B Training's artifact type of checkpoints.
const loraType = "lora"

// publishedFiles are the files of a checkpoint a lora artifact holds.
var publishedFiles = []string{"adapter_config.json", "adapter_model.safetensors"}

// loraMeta is the part of a version's metadata Hone reads.
type loraMeta struct {
	CheckpointID string `json:"hone_checkpoint_id"`
	// ImportError says why a version a client logged was not taken as a checkpoint (it is
	// not tried again).
	ImportError string `json:"hone_import_error"`
}

// SyncLoRA publishes the model's checkpoints that are not published yet and deletes the
// versions of checkpoints that are gone; with imports, a newer version logged by a client
// first becomes a checkpoint. Nothing without LoRA.
func (s *Service) SyncLoRA(ctx context.Context, m registry.Model, imports bool) error {
	if s.LoRA == nil {
		return nil
	}
	cps, err := s.Reg.AllCheckpoints(ctx, m.ID)
	if err != nil {
		return err
	}
	vs, err := s.LoRA.Versions(ctx, m.Entity, m.Project, m.Name, loraType)
	if err != nil {
		return err
	}
	ids := map[string]bool{}
	latest := 0
	for _, c := range cps {
		ids[c.ID] = true
		latest = max(latest, c.Step)
	}
	published := map[string]bool{}
	var errs []error
	var fork *wandb.Artifact
	forkStep := latest
	for i, v := range vs {
		var meta loraMeta
		_ = json.Unmarshal([]byte(v.Metadata), &meta)
		switch {
		case meta.CheckpointID != "" && ids[meta.CheckpointID]:
			published[meta.CheckpointID] = true
		case meta.CheckpointID != "":
			errs = append(errs, s.LoRA.DeleteVersion(ctx, m.Entity, v.ID))
		case meta.ImportError != "":
		default:
			if n := stepAlias(v.Aliases); n > forkStep {
				fork, forkStep = &vs[i], n
			}
		}
	}
	if imports && fork != nil {
		c, err := s.importLoRA(ctx, m, *fork, forkStep)
		if err != nil {
			err = fmt.Errorf("the %s artifact %s:v%d (step%d) is not taken as a checkpoint: %w", loraType, m.Name, fork.VersionIndex, forkStep, err)
			errs = append(errs, err, s.updateLoRAMeta(ctx, m, *fork, map[string]any{"hone_import_error": err.Error()}))
		} else {
			published[c.ID] = true
			cps = append(cps, c)
		}
	}
	sort.Slice(cps, func(i, j int) bool { return cps[i].Step < cps[j].Step })
	for i, c := range cps {
		if published[c.ID] {
			continue
		}
		errs = append(errs, s.publishLoRA(ctx, m, c, i == len(cps)-1))
	}
	return errors.Join(errs...)
}

// stepAlias is N of an alias step<N> (0 when none).
func stepAlias(aliases []string) int {
	best := 0
	for _, a := range aliases {
		if n, err := strconv.Atoi(strings.TrimPrefix(a, "step")); err == nil && strings.HasPrefix(a, "step") && n > best {
			best = n
		}
	}
	return best
}

// publishLoRA publishes checkpoint c of m.
func (s *Service) publishLoRA(ctx context.Context, m registry.Model, c registry.Checkpoint, latest bool) error {
	dir, err := s.Reg.CheckpointPath(ctx, m.ID, c.Step)
	if err != nil {
		return err
	}
	var files []wandb.PublishFile
	for _, name := range publishedFiles {
		files = append(files, wandb.PublishFile{Name: name, Path: filepath.Join(dir, name)})
	}
	_, err = s.LoRA.Publish(ctx, wandb.PublishInput{Entity: m.Entity, Project: m.Project, Type: loraType, Collection: m.Name,
		RunName: m.Name, Description: fmt.Sprintf("checkpoint step %d of %s on %s", c.Step, m.Name, m.BaseModel),
		Metadata: map[string]any{"hone_checkpoint_id": c.ID, "hone_model_id": m.ID, "step": c.Step, "base_model": m.BaseModel, "metrics": c.Metrics},
		Files:    files, Aliases: []string{"step" + strconv.Itoa(c.Step)}, Latest: latest})
	return err
}

// importLoRA makes a version a client logged into the model's collection its checkpoint
// step: the PEFT files are copied, read as an adapter of the base model (shapes, finite
// values), registered, and the version marked as that checkpoint's.
func (s *Service) importLoRA(ctx context.Context, m registry.Model, v wandb.Artifact, step int) (registry.Checkpoint, error) {
	base, ok := s.Models.Get(m.BaseModel)
	if !ok {
		return registry.Checkpoint{}, fmt.Errorf("the base model %s is not served by this process", m.BaseModel)
	}
	files, err := s.LoRA.LocalFiles(ctx, v)
	if err != nil {
		return registry.Checkpoint{}, err
	}
	dir := s.Reg.CheckpointDir(m.ID, step)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return registry.Checkpoint{}, err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".import-*")
	if err != nil {
		return registry.Checkpoint{}, err
	}
	defer os.RemoveAll(tmp)
	for _, name := range publishedFiles {
		src, ok := files[name]
		if !ok {
			return registry.Checkpoint{}, fmt.Errorf("it has no %s", name)
		}
		b, err := os.ReadFile(src)
		if err != nil {
			return registry.Checkpoint{}, err
		}
		if err := safetensors.WriteFileAtomic(filepath.Join(tmp, name), b, 0o644); err != nil {
			return registry.Checkpoint{}, err
		}
	}
	a, _, err := train.LoadCheckpoint(tmp, &base.Model.Config)
	if err != nil {
		return registry.Checkpoint{}, err
	}
	if err := train.CheckFinite(a); err != nil {
		return registry.Checkpoint{}, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return registry.Checkpoint{}, err
	}
	c, err := s.Reg.AddCheckpoint(ctx, m.ID, step, map[string]float64{})
	if err != nil {
		os.RemoveAll(dir)
		return registry.Checkpoint{}, err
	}
	if err := s.updateLoRAMeta(ctx, m, v, map[string]any{"hone_checkpoint_id": c.ID, "hone_model_id": m.ID, "step": step}); err != nil {
		return c, err
	}
	s.logger().Info("training: a lora artifact logged to the model became its checkpoint", "model", m.ID, "step", step, "artifact", fmt.Sprintf("%s:v%d", m.Name, v.VersionIndex))
	return c, nil
}

// updateLoRAMeta sets keys of a version's metadata.
func (s *Service) updateLoRAMeta(ctx context.Context, m registry.Model, v wandb.Artifact, set map[string]any) error {
	meta := map[string]any{}
	_ = json.Unmarshal([]byte(v.Metadata), &meta)
	for k, x := range set {
		meta[k] = x
	}
	js, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	mjs := string(js)
	_, err = s.LoRA.UpdateArtifact(ctx, m.Entity, v.ID, &mjs, nil, nil)
	return err
}

// syncLoRALogged is SyncLoRA whose failure is logged, not returned: the checkpoints are
// Hone's; their W&B artifacts follow them.
func (s *Service) syncLoRALogged(ctx context.Context, m registry.Model, imports bool) {
	if err := s.SyncLoRA(ctx, m, imports); err != nil {
		s.logger().Warn("training: the model's lora artifacts are not in step with its checkpoints", "model", m.ID, "err", err)
	}
}

// SyncAllLoRA runs SyncLoRA (without imports) on every model, at start: checkpoints made
// before their publishing, or while the store was unreachable, are published.
func (s *Service) SyncAllLoRA(ctx context.Context) error {
	if s.LoRA == nil {
		return nil
	}
	ms, err := s.Reg.AllModels(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range ms {
		if err := s.SyncLoRA(ctx, m, false); err != nil {
			errs = append(errs, fmt.Errorf("model %s: %w", m.ID, err))
		}
	}
	return errors.Join(errs...)
}
