package training

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/train"
)

// maxCachedAdapters bounds the loaded adapters kept for chat (each is a few MB).
const maxCachedAdapters = 64

// ResolveAdapter implements serving.AdapterResolver: `<entity>/<project>/<name>:step<N>`,
// `:latest` (also without a tag), and `wandb-artifact:///<entity>/<project>/<name>:step<N>`.
// Before the first checkpoint (and for `:step0`) the model is its base model. A checkpoint
// of another entity is not found.
func (s *Service) ResolveAdapter(ctx context.Context, entity, name string) (serving.Adapter, bool, error) {
	ref := strings.TrimPrefix(name, "wandb-artifact:///")
	tag := "latest"
	if i := strings.LastIndex(ref, ":"); i >= 0 {
		ref, tag = ref[:i], ref[i+1:]
	}
	parts := strings.Split(ref, "/")
	if len(parts) != 3 || parts[0] != entity {
		return serving.Adapter{}, false, nil
	}
	// A checkpoint found in the store can be deleted (ART's delete_checkpoints prunes while
	// training goes on) before its files are read: look again, a few times, rather than fail.
	for try := 1; ; try++ {
		a, ok, err := s.resolveAdapter(ctx, ref, tag, parts)
		if try < 4 && (errors.Is(err, fs.ErrNotExist) || errors.Is(err, registry.ErrNotFound)) {
			continue
		}
		return a, ok, err
	}
}

// resolveAdapter is one try of ResolveAdapter.
func (s *Service) resolveAdapter(ctx context.Context, ref, tag string, parts []string) (serving.Adapter, bool, error) {
	m, err := s.Reg.ByName(ctx, parts[0], parts[1], parts[2])
	if errors.Is(err, registry.ErrNotFound) {
		return serving.Adapter{}, false, nil
	}
	if err != nil {
		return serving.Adapter{}, false, err
	}
	step0 := serving.Adapter{Base: m.BaseModel, Name: ref + ":step0"}
	var c registry.Checkpoint
	switch {
	case tag == "step0":
		// Step 0 is the base model itself (what ART samples from before any training).
		return step0, true, nil
	case tag == "latest":
		c, err = s.Reg.Latest(ctx, m.ID)
		if errors.Is(err, registry.ErrNotFound) {
			return step0, true, nil
		}
	case strings.HasPrefix(tag, "step") && isStepNumber(tag[4:]):
		n, perr := strconv.Atoi(strings.TrimPrefix(tag, "step"))
		if perr != nil {
			return serving.Adapter{}, false, nil
		}
		c, err = s.Reg.Step(ctx, m.ID, n)
	default:
		// An alias (registry/aliases.go) serves the checkpoint it points at.
		n, aerr := s.Reg.AliasStep(ctx, m.ID, tag)
		if aerr != nil {
			return serving.Adapter{}, false, ignoreNotFound(aerr)
		}
		if n == 0 {
			return step0, true, nil
		}
		c, err = s.Reg.Step(ctx, m.ID, n)
	}
	if errors.Is(err, registry.ErrNotFound) {
		return serving.Adapter{}, false, nil
	}
	if err != nil {
		return serving.Adapter{}, false, err
	}
	base, ok := s.Models.Get(m.BaseModel)
	if !ok {
		return serving.Adapter{}, false, fmt.Errorf("the base model %s of %s is not served", m.BaseModel, ref)
	}
	a, err := s.loadAdapter(ctx, m.ID, c, &base.Model.Config)
	if err != nil {
		return serving.Adapter{}, false, err
	}
	return serving.Adapter{Base: m.BaseModel, LoRA: a, Name: fmt.Sprintf("%s:step%d", ref, c.Step)}, true, nil
}

// ListAdapters implements serving.AdapterResolver: entity's trained models.
func (s *Service) ListAdapters(ctx context.Context, entity string) ([]serving.TrainedModel, error) {
	ms, err := s.Reg.List(ctx, entity)
	if err != nil {
		return nil, err
	}
	out := make([]serving.TrainedModel, 0, len(ms))
	for _, m := range ms {
		var created int64
		if t, err := db.ParseTime(m.CreatedAt); err == nil {
			created = t.Unix()
		}
		out = append(out, serving.TrainedModel{Name: m.Entity + "/" + m.Project + "/" + m.Name, Base: m.BaseModel, Owner: m.Entity, Created: created})
	}
	return out, nil
}

// loadAdapter returns checkpoint c of a model, from the cache or its directory. The cache
// is keyed by model id and step and holds the checkpoint's id: a step written again (on this
// node or any other sharing the store) has a new id, so a stale adapter is never served.
func (s *Service) loadAdapter(ctx context.Context, modelID string, c registry.Checkpoint, cfg *model.Config) (*model.LoRA, error) {
	step := c.Step
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.adapters[modelID][step]; ok && e.id == c.ID {
		return e.lora, nil
	}
	dir, err := s.Reg.CheckpointPath(ctx, modelID, step)
	if err != nil {
		return nil, err
	}
	a, err := model.LoadLoRA(dir, cfg)
	if err != nil {
		return nil, err
	}
	// A checkpoint of diverged training (written by a Hone that did not check) would make
	// every logit NaN: refuse it by name rather than answer garbage.
	if err := train.CheckFinite(a); err != nil {
		s.logger().Warn("refusing a non-finite checkpoint", "model", modelID, "step", step, "err", err)
		return nil, fault.Invalid("model", "checkpoint step %d cannot be served: %v", step, err)
	}
	if s.adapters == nil {
		s.adapters = map[string]map[int]cachedAdapter{}
	}
	n := 0
	for _, steps := range s.adapters {
		n += len(steps)
	}
	if n >= maxCachedAdapters { // bounded: start again (they load again on use)
		clear(s.adapters)
	}
	if s.adapters[modelID] == nil {
		s.adapters[modelID] = map[int]cachedAdapter{}
	}
	s.adapters[modelID][step] = cachedAdapter{id: c.ID, lora: a}
	return a, nil
}

// cachedAdapter is a loaded adapter and the id of the checkpoint it was loaded from.
type cachedAdapter struct {
	id   string
	lora *model.LoRA
}

// forget drops a model's cached adapters: the given steps, or all of them.
func (s *Service) forget(modelID string, steps ...int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(steps) == 0 {
		delete(s.adapters, modelID)
		return
	}
	for _, st := range steps {
		delete(s.adapters[modelID], st)
	}
}

// isStepNumber tells whether s (after "step") is a step number.
func isStepNumber(s string) bool {
	_, err := strconv.Atoi(s)
	return s != "" && err == nil
}

// ignoreNotFound is nil for registry.ErrNotFound (a name chat does not know), else err.
func ignoreNotFound(err error) error {
	if errors.Is(err, registry.ErrNotFound) {
		return nil
	}
	return err
}
