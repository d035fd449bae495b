// Package training is the training service: trainable models on the served base models of
// internal/serving and their LoRA checkpoints (internal/registry), RL and SFT jobs (specs
// validated when a job is created and queued as such on internal/jobs, run by Run with the
// engine of internal/train), training data (uploads, weave:/// Datasets and tables, local
// paths under a root), trajectory logs in the trace store, and trained checkpoints resolved
// for chat completions (ResolveAdapter). Its errors for a caller's mistake are faults
// (internal/fault); it knows nothing of HTTP.
//
//	svc := &training.Service{Reg: reg, Queue: q, Models: models, FilesDir: dir}
//	job, err := svc.CreateSFTJob(ctx, m, training.SFTRequest{TrainingDataURL: url})
//	go q.Work(ctx, 1, owner, svc.Run, logger)
package training

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/quota"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/trace"
	"github.com/honeai/hone/internal/trainingdata"
)

// Service trains adapters of the served models. Reg, Queue and Models are required; the
// zero values of the rest are: no trace store (no trajectory logs, no weave:/// data), no
// local data paths, rank-8 alpha-16 adapters, the default logger.
type Service struct {
	Reg    *registry.Registry
	Queue  *jobs.Queue
	Models *serving.Models // the served base models
	Trace  *trace.Service  // trajectory logs and weave:/// training data (may be nil)
	// Artifacts resolves wandb-artifact:/// training data (may be nil: such URLs are refused).
	Artifacts ArtifactFiles
	// LoRA, when set, keeps the checkpoints as W&B "lora" artifacts (lora_artifacts.go).
	LoRA LoRAArtifacts
	// DataRoot is the directory local training_data_url paths must lie under ("" = none allowed).
	DataRoot string
	// FilesDir keeps uploaded training files.
	FilesDir string
	// Blobs, when set, keeps uploaded training files instead of FilesDir, shared by every
	// node on the store (uploads_blob.go).
	Blobs SharedFiles
	Log   *slog.Logger
	// LoRARank and LoRAAlpha shape the adapters of new models.
	LoRARank  int
	LoRAAlpha float64
	// SFTSaveEvery is how often a running SFT job saves its resume state (resume.go); 0
	// saves it only when a shutdown stops the job.
	SFTSaveEvery time.Duration
	// MaxUpload bounds one uploaded file (0: none; the body limit bounds it anyway) and
	// Quota, when set, what each entity's uploads store (uploads_blob.go).
	MaxUpload int64
	Quota     *quota.Quota
	// Evaluations, when set, checks the evaluation a training job names (loop.go); nil
	// refuses the field.
	Evaluations EvaluationChecker

	mu       sync.Mutex
	adapters map[string]map[int]cachedAdapter // model id → checkpoint step → loaded adapter
}

// ArtifactFiles finds a file of a W&B artifact in the blob store (internal/wandb.Service).
type ArtifactFiles interface {
	// ResolveFile returns the path of file in artifact nameVersion ("<name>:<version or
	// alias>") of entity's project, or a not-found fault naming what is missing.
	ResolveFile(ctx context.Context, entity, project, nameVersion, file string) (string, error)
}

func (s *Service) logger() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// NewModel is a trainable model to create.
type NewModel struct {
	Entity, Project, Name, BaseModel string
	// ReturnExisting returns the model of that name instead of a conflict.
	ReturnExisting bool
}

// Validate checks the new model's project and name.
func (n NewModel) Validate() error {
	for _, f := range [][2]string{{"project", n.Project}, {"name", n.Name}} {
		if err := validName(f[0], f[1]); err != nil {
			return err
		}
	}
	return nil
}

// CreateModel creates a trainable model on a served base model.
func (s *Service) CreateModel(ctx context.Context, n NewModel) (registry.Model, error) {
	if err := n.Validate(); err != nil {
		return registry.Model{}, err
	}
	base, ok := s.Models.Get(n.BaseModel)
	if !ok || n.BaseModel == "" {
		var names []string
		for _, m := range s.Models.List() {
			names = append(names, m.Name)
		}
		return registry.Model{}, fault.Invalid("base_model", "base_model %q is not a base model this server serves (GET /v1/preview/base-models lists %v)", n.BaseModel, names)
	}
	if base.Template == nil {
		return registry.Model{}, fault.Invalid("base_model", "base_model %q has no chat template, which training renders its data with; start the server with --chat-template %s=FILE", n.BaseModel, n.BaseModel)
	}
	m, _, err := s.Reg.Create(ctx, registry.Model{Entity: n.Entity, Project: n.Project, Name: n.Name, BaseModel: n.BaseModel}, n.ReturnExisting)
	if errors.Is(err, registry.ErrExists) {
		return m, fault.Conflict("name", "A model named %s/%s/%s exists (id %s); send return_existing to get it", n.Entity, n.Project, n.Name, m.ID)
	}
	return m, err
}

func validName(param, v string) error {
	if v == "" {
		return fault.Invalid(param, "%s is required", param)
	}
	if len(v) > 128 || strings.ContainsAny(v, "/:\\ \t\n@") {
		return fault.Invalid(param, "%s %q must be at most 128 characters without '/', ':', '\\\\', '@' or spaces", param, v)
	}
	return nil
}

// Model finds a model of entity by id or <entity>/<project>/<name>; another entity's model
// is not found, like a missing one (nothing leaks).
func (s *Service) Model(ctx context.Context, entity, ref string) (registry.Model, error) {
	m, err := s.Reg.Resolve(ctx, ref)
	if errors.Is(err, registry.ErrNotFound) || (err == nil && m.Entity != entity) {
		return registry.Model{}, fault.NotFound("model_id", "Model %s not found", ref)
	}
	return m, err
}

// DeleteModel deletes a model with its checkpoints and returns how many there were.
func (s *Service) DeleteModel(ctx context.Context, m registry.Model) (int, error) {
	n, err := s.Reg.Delete(ctx, m.ID)
	if err != nil {
		return 0, err
	}
	s.forget(m.ID)
	s.syncLoRALogged(ctx, m, false) // its checkpoints are gone: so are their versions
	return n, nil
}

// DeleteCheckpoints deletes some checkpoints of a model; missing lists the steps it did not
// have.
func (s *Service) DeleteCheckpoints(ctx context.Context, m registry.Model, steps []int) (deleted int, missing []int, err error) {
	if steps == nil {
		return 0, nil, fault.Invalid("steps", "steps is required: a list of checkpoint steps")
	}
	deleted, missing, err = s.Reg.DeleteCheckpoints(ctx, m.ID, steps)
	var aliased *registry.AliasedError
	if errors.As(err, &aliased) {
		return 0, nil, fault.Conflict("steps", "%v: move the alias to another checkpoint first (nothing was deleted)", aliased)
	}
	if err != nil {
		return 0, nil, err
	}
	s.forget(m.ID, steps...)
	s.syncLoRALogged(ctx, m, false)
	return deleted, missing, nil
}

// DefaultPruneMetric is the metric PruneCheckpoints keeps the best checkpoints by, as ART's
// delete_checkpoints does.
const DefaultPruneMetric = "val/reward"

// PruneCheckpoints deletes every checkpoint of model m except the latest and the keepBest
// best by metric (default val/reward, higher is better; keepBest default 1), as ART's
// delete_checkpoints does. A metric no checkpoint has is a fault (nothing is deleted).
func (s *Service) PruneCheckpoints(ctx context.Context, m registry.Model, metric string, keepBest *int) (registry.PruneResult, error) {
	if metric == "" {
		metric = DefaultPruneMetric
	}
	n := 1
	if keepBest != nil {
		if *keepBest < 1 {
			return registry.PruneResult{}, fault.Invalid("keep_best", "keep_best must be at least 1, got %d", *keepBest)
		}
		n = *keepBest
	}
	res, err := s.Reg.Prune(ctx, m.ID, metric, n)
	if errors.Is(err, registry.ErrNoMetric) {
		names := map[string]bool{}
		if cs, err := s.Reg.AllCheckpoints(ctx, m.ID); err == nil {
			for _, c := range cs {
				for k := range c.Metrics {
					names[k] = true
				}
			}
		}
		var list []string
		for k := range names {
			list = append(list, k)
		}
		sort.Strings(list)
		return res, fault.Invalid("best_checkpoint_metric", "no checkpoint of %s/%s/%s has the metric %q, so none can be called best and nothing was deleted; its checkpoints have %v (POST …/log with split val records val/reward)", m.Entity, m.Project, m.Name, metric, list)
	}
	if err != nil {
		return res, err
	}
	s.forget(m.ID, res.Deleted...)
	s.syncLoRALogged(ctx, m, false)
	return res, nil
}

// CreateRLJob validates an RL request for model m and queues its spec (one RL step).
func (s *Service) CreateRLJob(ctx context.Context, m registry.Model, req RLRequest) (jobs.Job, error) {
	if u := req.TrajectoryGroupsURL; u != "" {
		const param = "trajectory_groups_url"
		if len(req.TrajectoryGroups) > 0 {
			return jobs.Job{}, fault.Invalid(param, "send trajectory_groups or trajectory_groups_url, not both")
		}
		if err := s.checkDataURLOf(ctx, param, m.Entity, u); err != nil {
			return jobs.Job{}, err
		}
		data, err := s.readData(ctx, m.Entity, u)
		if err != nil {
			return jobs.Job{}, fault.Invalid(param, "%s: %v", param, err)
		}
		for i, line := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if !json.Valid(line) {
				return jobs.Job{}, fault.Invalid(param, "%s: row %d is not JSON", param, i+1)
			}
			req.TrajectoryGroups = append(req.TrajectoryGroups, json.RawMessage(line))
		}
		req.TrajectoryGroupsURL = ""
	}
	spec, err := NewRLSpec(req)
	if err != nil {
		return jobs.Job{}, err
	}
	if st := spec.KLRefStep; st != nil && *st > 0 && spec.Config.KLPenaltyCoef > 0 {
		if _, err := s.Reg.Step(ctx, m.ID, *st); errors.Is(err, registry.ErrNotFound) {
			return jobs.Job{}, fault.Invalid("experimental_config.kl_penalty_reference_step", "kl_penalty_reference_step %d is not a checkpoint of this model", *st)
		}
	}
	// The trajectories are tokenised now, where the base model is served here, so that a
	// choice whose sampled ids cannot be recovered is a 400 naming it, not a failed job.
	if base, ok := s.Models.Get(m.BaseModel); ok && base.Template != nil && base.Tok != nil {
		chat := chatTokenizer(base)
		if err := chat.CheckGroups(spec.Groups, spec.Config.AllowWithoutLogprobs); err != nil {
			var fe *trainingdata.FieldError
			if errors.As(err, &fe) {
				return jobs.Job{}, fault.Invalid(fe.Field, "%s: %s", fe.Field, fe.Msg)
			}
			return jobs.Job{}, err
		}
	}
	ev, err := s.jobEvaluation(ctx, m, req.Evaluation, req.Promote)
	if err != nil {
		return jobs.Job{}, err
	}
	return s.Queue.Enqueue(ctx, m.ID, m.Entity, "rl", queued{Version: 1, RL: &spec, Evaluation: ev})
}

// CreateSFTJob validates an SFT request for model m (its data URL included) and queues its
// spec.
func (s *Service) CreateSFTJob(ctx context.Context, m registry.Model, req SFTRequest) (jobs.Job, error) {
	spec, err := NewSFTSpec(req)
	if err != nil {
		return jobs.Job{}, err
	}
	if err := s.checkDataURL(ctx, m.Entity, spec.DataURL); err != nil {
		return jobs.Job{}, err
	}
	ev, err := s.jobEvaluation(ctx, m, req.Evaluation, req.Promote)
	if err != nil {
		return jobs.Job{}, err
	}
	return s.Queue.Enqueue(ctx, m.ID, m.Entity, "sft", queued{Version: 1, SFT: &spec, Evaluation: ev})
}

// Upload is a stored training data file; URL is what training_data_url takes.
type Upload struct {
	ID    string `json:"id"`
	Bytes int    `json:"bytes"`
	URL   string `json:"url"`
}

// SaveUpload stores a training data file of entity.
func (s *Service) SaveUpload(entity string, data []byte) (Upload, error) {
	return s.SaveUploadContext(context.Background(), entity, data)
}

// SaveUploadContext is SaveUpload under ctx (for the shared blob store's writes).
func (s *Service) SaveUploadContext(ctx context.Context, entity string, data []byte) (Upload, error) {
	if len(strings.TrimSpace(string(data))) == 0 {
		return Upload{}, fault.Invalid("file", "the file is empty")
	}
	if err := s.checkUpload(ctx, entity, int64(len(data))); err != nil {
		return Upload{}, err
	}
	id := "file-" + strings.ReplaceAll(uuid.Must(uuid.NewV7()).String(), "-", "")
	if s.Blobs != nil {
		if err := s.saveSharedUpload(ctx, entity, id, data); err != nil {
			return Upload{}, err
		}
		return Upload{ID: id, Bytes: len(data), URL: "hone-file:///" + id}, nil
	}
	if err := s.saveLocalUpload(ctx, entity, id, data); err != nil {
		return Upload{}, err
	}
	return Upload{ID: id, Bytes: len(data), URL: "hone-file:///" + id}, nil
}
