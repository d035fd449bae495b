// Package evaluation runs evaluations of models and checkpoints on the job queue, with
// Hone's built-in scorers (exact match, contains, regex, JSON Schema, numeric within a
// tolerance, tool call equals, and a judge: a prompt template run on a served model, its
// answer held by a constraint to labels with scores), and stores each run as a Weave
// Evaluation in the trace store (the Evaluation object, a predict-and-score call per row,
// the summary), so that the Weave SDK and Studio's evaluation pages read it as their own.
//
// An evaluation job (kind "eval") evaluates one model or checkpoint; a training job that
// names an evaluation runs it on its new checkpoint (Runner), and the scores land in the
// checkpoint's metrics as eval/<evaluation>/<metric>. A job that runs again (its worker died
// or shut down) goes on from the rows its earlier run recorded. Generation goes through the
// chat completions API (Chat), so every model chat serves can be evaluated, checkpoints and
// aliases included. Errors for a caller's mistake are faults (internal/fault).
//
//	svc, err := evaluation.Open(ctx, d)
//	svc.Reg, svc.Models, svc.Training, svc.Trace, svc.Queue, svc.Chat = reg, models, tr, tc, q, chat
//	job, err := svc.Create(ctx, "local", body)
//	go q.Work(ctx, 1, owner, svc.Runner(tr.Run), logger)
package evaluation

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/trace"
	"github.com/honeai/hone/internal/training"
)

// Kind is the job kind of an evaluation job.
const Kind = "eval"

// Event types of evaluation runs (in evaluation jobs, and in training jobs that name an
// evaluation).
const (
	// EventStarted: {evaluation, evaluation_ref, model, label, num_rows, done_rows, call_id}.
	EventStarted = "evaluation_started"
	// EventProgress: {model, label, rows_done, num_rows, scores} (scores: the running means).
	EventProgress = "evaluation_progress"
	// EventEnded: {model, label, step, evaluation, evaluation_ref, call_id, summary, metrics}.
	EventEnded = "evaluation_ended"
	// EventCheckpointSaved: a training job saved its checkpoint {step} and goes on to
	// evaluate it; a run of the job that starts again evaluates that step without training.
	EventCheckpointSaved = "checkpoint_saved"
)

// Chat runs chat completions for evaluations: body is a chat completion request (OpenAI's),
// the answer its response. cmd/hone gives the chat API in process. A request the API refuses
// is a fault of its kind.
type Chat interface {
	Complete(ctx context.Context, entity string, body []byte) ([]byte, error)
}

// AliasResolver gives the checkpoint step an alias of a model points at (internal/registry).
type AliasResolver interface {
	AliasStep(ctx context.Context, modelID, alias string) (int, error)
}

// Promoter moves aliases by their promotion rules (internal/loop).
type Promoter interface {
	// CheckPromote checks, when a job is created, that alias of the model has a promotion
	// rule that an evaluation (evaluationRef, of spec) can decide (a fault of param if not).
	CheckPromote(ctx context.Context, modelID, alias, evaluationRef string, spec Spec, param string) error
	// RuleEvaluation is the ref of the Evaluation the alias's rule decides by.
	RuleEvaluation(ctx context.Context, modelID, alias, param string) (string, error)
	// Promote decides, after the candidate's evaluation run, whether the alias moves to it.
	Promote(ctx context.Context, j jobs.Job, alias string, je JobEvaluation, candidate RunRecord, progress func(string, any)) error
}

// Service runs evaluations. Every field is required except Log, Aliases and Promoter.
type Service struct {
	DB       *db.DB
	Reg      *registry.Registry
	Models   *serving.Models
	Training *training.Service
	Trace    *trace.Service
	Queue    *jobs.Queue
	Chat     Chat
	Log      *slog.Logger
	Aliases  AliasResolver
	Promoter Promoter

	now func() time.Time
	ops sync.Map // project + op name → the op's ref, published once per process
}

// Open migrates the evaluation tables on d.
func Open(ctx context.Context, d *db.DB) (*Service, error) {
	if err := d.Migrate(ctx, "evaluation", migrations); err != nil {
		return nil, err
	}
	return &Service{DB: d, now: time.Now}, nil
}

func (s *Service) logger() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// Target is the model an evaluation asks: a served base model, or a checkpoint of a
// trainable model (resolved from :step<N>, :latest, no tag, or an alias).
type Target struct {
	// Requested is the model as the request named it.
	Requested string `json:"requested"`
	// Name is what chat is asked: the base model's name, or <entity>/<project>/<name>:step<N>.
	Name      string `json:"name"`
	BaseModel string `json:"base_model"`
	ModelID   string `json:"model_id,omitempty"`
	Project   string `json:"project,omitempty"` // the trainable model's <entity>/<project>
	Step      *int   `json:"step,omitempty"`    // nil for a base model
}

// JobModelID is the model id of the target's jobs: the trainable model's, or base:<name>.
func (t Target) JobModelID() string {
	if t.ModelID != "" {
		return t.ModelID
	}
	return "base:" + t.BaseModel
}

// ResolveTarget finds the model a request names for entity: a served base model, or
// <entity>/<project>/<name>[:step<N>|:latest|:<alias>]. Another entity's model, or a step
// or alias the model does not have, is not found (a fault of param).
func (s *Service) ResolveTarget(ctx context.Context, entity, ref, param string) (Target, error) {
	t := Target{Requested: ref}
	if ref == "" {
		return t, fault.Invalid(param, "%s is required: a served model or <entity>/<project>/<name>[:step<N>|:latest|:<alias>]", param)
	}
	if m, ok := s.Models.Get(ref); ok {
		t.Name, t.BaseModel = m.Name, m.Name
		return t, nil
	}
	name := strings.TrimPrefix(ref, "wandb-artifact:///")
	tag := ""
	if i := strings.LastIndex(name, ":"); i >= 0 {
		name, tag = name[:i], name[i+1:]
	}
	parts := strings.Split(name, "/")
	notFound := fault.NotFound(param, "%s %q is neither a served model nor a trainable model of this entity (with that checkpoint or alias)", param, ref)
	if len(parts) != 3 || parts[0] != entity {
		return t, notFound
	}
	m, err := s.Reg.ByName(ctx, parts[0], parts[1], parts[2])
	if errors.Is(err, registry.ErrNotFound) {
		return t, notFound
	}
	if err != nil {
		return t, err
	}
	if _, ok := s.Models.Get(m.BaseModel); !ok {
		return t, fault.Invalid(param, "%s %q: its base model %s is not served by this server", param, ref, m.BaseModel)
	}
	step := 0
	switch {
	case tag == "" || tag == "latest":
		c, err := s.Reg.Latest(ctx, m.ID)
		if err == nil {
			step = c.Step
		} else if !errors.Is(err, registry.ErrNotFound) {
			return t, err
		}
	case strings.HasPrefix(tag, "step") && isDigits(tag[4:]):
		step, _ = strconv.Atoi(tag[4:])
		if step > 0 {
			if _, err := s.Reg.Step(ctx, m.ID, step); errors.Is(err, registry.ErrNotFound) {
				return t, fault.NotFound(param, "%s %q: the model has no checkpoint step %d", param, ref, step)
			} else if err != nil {
				return t, err
			}
		}
	default:
		if s.Aliases == nil {
			return t, notFound
		}
		step, err = s.Aliases.AliasStep(ctx, m.ID, tag)
		if errors.Is(err, registry.ErrNotFound) {
			return t, fault.NotFound(param, "%s %q: the model has no checkpoint or alias %q", param, ref, tag)
		}
		if err != nil {
			return t, err
		}
	}
	t.Name = fmt.Sprintf("%s:step%d", name, step)
	t.BaseModel, t.ModelID, t.Project, t.Step = m.BaseModel, m.ID, m.Entity+"/"+m.Project, &step
	return t, nil
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// CreateRequest is POST /v1/preview/evaluation-jobs: the model, and either an Evaluation
// Hone stored before (evaluation, its ref) or one to store (the Spec's fields).
type CreateRequest struct {
	Model string `json:"model"`
	// Project is the trace project the Evaluation and its calls are in ("<project>" of the
	// caller's entity or "<entity>/<project>"); default: the trainable model's project.
	Project    string `json:"project,omitempty"`
	Evaluation string `json:"evaluation,omitempty"`
	Spec
	// Promote names an alias of the model to move to the evaluated checkpoint when its
	// promotion rule says so (internal/loop).
	Promote string `json:"promote,omitempty"`
}

// JobEvaluation is an evaluation to run as part of a job: where, which Evaluation, and its
// spec (as stored in the Evaluation's metadata). It is the payload of an evaluation job (with
// the target) and the evaluation field of a training job's payload.
type JobEvaluation struct {
	Project       string `json:"project"`
	EvaluationRef string `json:"evaluation_ref"`
	Spec          Spec   `json:"spec"`
	Promote       string `json:"promote,omitempty"`
	Target        Target `json:"target"` // an evaluation job's (a training job evaluates its new checkpoint)
}

// Create validates an evaluation request of entity (its model, data, scorers), stores its
// Evaluation in the trace project and queues the job.
func (s *Service) Create(ctx context.Context, entity string, body json.RawMessage) (jobs.Job, JobEvaluation, error) {
	var req CreateRequest
	if err := strictDecode(body, &req, ""); err != nil {
		return jobs.Job{}, JobEvaluation{}, err
	}
	t, err := s.ResolveTarget(ctx, entity, req.Model, "model")
	if err != nil {
		return jobs.Job{}, JobEvaluation{}, err
	}
	project, err := s.project(entity, req.Project, t, "project")
	if err != nil {
		return jobs.Job{}, JobEvaluation{}, err
	}
	var inline json.RawMessage
	if req.Evaluation != "" {
		var m map[string]json.RawMessage
		json.Unmarshal(body, &m)
		for _, k := range []string{"name", "dataset", "input_field", "limit", "generation", "scorers"} {
			if _, ok := m[k]; ok {
				return jobs.Job{}, JobEvaluation{}, fault.Invalid(k, "send evaluation (the ref of an Evaluation Hone stored) or the evaluation's fields (%s), not both", k)
			}
		}
	} else {
		inline = body
	}
	je, err := s.prepare(ctx, entity, project, req.Evaluation, inline, "")
	if err != nil {
		return jobs.Job{}, JobEvaluation{}, err
	}
	je.Target, je.Promote = t, req.Promote
	if req.Promote != "" {
		if s.Promoter == nil || t.ModelID == "" {
			return jobs.Job{}, JobEvaluation{}, fault.Invalid("promote", "promote needs a checkpoint of a trainable model with that alias")
		}
		if err := s.Promoter.CheckPromote(ctx, t.ModelID, req.Promote, je.EvaluationRef, je.Spec, "promote"); err != nil {
			return jobs.Job{}, JobEvaluation{}, err
		}
	}
	j, err := s.Queue.Enqueue(ctx, t.JobModelID(), entity, Kind, je)
	return j, je, err
}

// project is the trace project of an evaluation: the request's ("<project>" or
// "<entity>/<project>", the caller's entity only), else the trainable model's.
func (s *Service) project(entity, p string, t Target, param string) (string, error) {
	if p == "" {
		if t.Project == "" {
			return "", fault.Invalid(param, "%s is required to evaluate a base model: the trace project the Evaluation is stored in", param)
		}
		return t.Project, nil
	}
	e, name, ok := strings.Cut(p, "/")
	if !ok {
		e, name = entity, p
	}
	if e != entity {
		return "", fault.Forbidden(param, "this API key may only use projects of entity %q", entity)
	}
	if name == "" || strings.ContainsAny(name, "/: \t\n") || len(name) > 128 {
		return "", fault.Invalid(param, "%s %q is not a project name", param, p)
	}
	return e + "/" + name, nil
}

// prepare reads an Evaluation Hone stored (ref) or validates and stores an inline spec
// (inline, a JSON object holding the Spec's fields; param prefixes the fields named).
func (s *Service) prepare(ctx context.Context, entity, project, ref string, inline json.RawMessage, param string) (JobEvaluation, error) {
	je := JobEvaluation{Project: project}
	if ref != "" {
		p := join(param, "evaluation")
		if param != "" {
			p = param
		}
		r, err := trace.ParseRef(ref)
		if err != nil || r.Kind != "object" || len(r.Extra) > 0 {
			return je, fault.Invalid(p, "%s %q is not a weave:///<entity>/<project>/object/<name>:<version> ref", p, ref)
		}
		if r.Entity != entity {
			return je, fault.Forbidden(p, "this API key may only use evaluations of entity %q", entity)
		}
		obj, err := s.Trace.ObjRead(ctx, trace.ObjReadReq{ProjectID: r.Entity + "/" + r.Project, ObjectID: r.Name, Digest: r.Digest})
		if err != nil {
			return je, fault.NotFound(p, "%s %s: %v", p, ref, err)
		}
		var val struct {
			Type     string `json:"_type"`
			Dataset  string `json:"dataset"`
			Metadata struct {
				Hone *Spec `json:"hone"`
			} `json:"metadata"`
		}
		json.Unmarshal(obj.Obj.Val, &val)
		if val.Type != "Evaluation" || val.Metadata.Hone == nil {
			return je, fault.Invalid(p, "%s %s is not an Evaluation Hone stored (one the Weave SDK stored has scorers that are code the server cannot run): create it through POST /v1/preview/evaluation-jobs", p, ref)
		}
		je.Spec = *val.Metadata.Hone
		je.Spec.Dataset = val.Dataset
		je.Project = r.Entity + "/" + r.Project
		je.EvaluationRef = "weave:///" + je.Project + "/object/" + r.Name + ":" + obj.Obj.Digest
		if err := je.Spec.Check(""); err != nil {
			return je, fault.Invalid(p, "%s %s holds a spec Hone cannot run: %v", p, ref, err)
		}
		return je, nil
	}
	var sp Spec
	if err := strictDecodeSpec(inline, &sp, param); err != nil {
		return je, err
	}
	if err := sp.Check(param); err != nil {
		return je, err
	}
	ds, _, err := s.dataset(ctx, entity, project, sp, join(param, "dataset"))
	if err != nil {
		return je, err
	}
	sp.Dataset = ds
	for i, sc := range sp.Scorers {
		if sc.Type == Judge {
			if _, err := s.ResolveTarget(ctx, entity, sc.Model, fmt.Sprintf("%s[%d].model", join(param, "scorers"), i)); err != nil {
				return je, err
			}
		}
	}
	if je.EvaluationRef, err = s.publishEvaluation(ctx, project, sp); err != nil {
		return je, err
	}
	je.Spec = sp
	return je, nil
}

// strictDecodeSpec decodes the Spec's fields of a request object, refusing fields neither
// the Spec nor the request (model, project, evaluation, promote) has.
func strictDecodeSpec(raw json.RawMessage, sp *Spec, param string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return fault.Invalid(param, "%s must be a JSON object", orBody(param))
	}
	for _, k := range []string{"model", "project", "evaluation", "promote"} {
		delete(m, k)
	}
	b, _ := json.Marshal(m)
	if err := strictDecode(b, sp, param); err != nil {
		return err
	}
	for i := range sp.Scorers {
		// Each scorer's own fields: an unknown one is named.
		var list []json.RawMessage
		json.Unmarshal(m["scorers"], &list)
		if i < len(list) {
			var one Scorer
			if err := strictDecode(list[i], &one, fmt.Sprintf("%s[%d]", join(param, "scorers"), i)); err != nil {
				return err
			}
		}
	}
	if g, ok := m["generation"]; ok && string(g) != "null" {
		var one Generation
		if err := strictDecode(g, &one, join(param, "generation")); err != nil {
			return err
		}
	}
	return nil
}

// dataset resolves a spec's dataset to a Dataset ref with its digest (a table, or an
// uploaded JSONL file, becomes a Dataset "<name>-data" in project) and reads and checks its
// rows.
func (s *Service) dataset(ctx context.Context, entity, project string, sp Spec, param string) (string, []*example, error) {
	u := sp.Dataset
	if u == "" {
		return "", nil, fault.Invalid(param, "%s is required: a weave:/// Dataset or table ref, or an uploaded file (hone-file:///…)", param)
	}
	var ref string
	switch {
	case strings.HasPrefix(u, "weave:///"):
		r, err := trace.ParseRef(u)
		if err != nil || (r.Kind != "object" && r.Kind != "table") || len(r.Extra) > 0 {
			return "", nil, fault.Invalid(param, "%s %q is not a weave:///<entity>/<project>/object/<name>:<version> or weave:///<entity>/<project>/table/<digest> ref", param, u)
		}
		if r.Entity != entity {
			return "", nil, fault.Forbidden(param, "this API key may only use data of entity %q", entity)
		}
		p := r.Entity + "/" + r.Project
		if r.Kind == "table" {
			if _, err := s.Trace.TableQueryStats(ctx, trace.TableQueryStatsReq{ProjectID: p, Digest: r.Digest}); err != nil {
				return "", nil, fault.NotFound(param, "%s %s: %v", param, u, err)
			}
			if p != project {
				return "", nil, fault.Invalid(param, "%s %s is in project %s; the evaluation is stored in %s: use a table of that project", param, u, p, project)
			}
			if ref, err = s.wrapTable(ctx, project, sp.Name, "weave:///"+p+"/table/"+r.Digest); err != nil {
				return "", nil, err
			}
			break
		}
		obj, err := s.Trace.ObjRead(ctx, trace.ObjReadReq{ProjectID: p, ObjectID: r.Name, Digest: r.Digest})
		if err != nil {
			return "", nil, fault.NotFound(param, "%s %s: %v", param, u, err)
		}
		ref = "weave:///" + p + "/object/" + r.Name + ":" + obj.Obj.Digest
	case strings.HasPrefix(u, "hone-file:///") || strings.HasPrefix(u, "file://") || strings.HasPrefix(u, "/"):
		data, err := s.Training.ReadDataURL(ctx, param, entity, u)
		if err != nil {
			return "", nil, err
		}
		var rows []json.RawMessage
		for i, line := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(line)) == 0 {
				continue
			}
			if !json.Valid(line) {
				return "", nil, fault.Invalid(param, "%s: line %d is not JSON", param, i+1)
			}
			rows = append(rows, json.RawMessage(bytes.TrimSpace(line)))
		}
		if len(rows) == 0 {
			return "", nil, fault.Invalid(param, "%s %s holds no rows", param, u)
		}
		tbl, err := s.Trace.TableCreate(ctx, trace.TableCreateReq{Table: trace.TableSchemaForInsert{ProjectID: project, Rows: rows}})
		if err != nil {
			return "", nil, err
		}
		if ref, err = s.wrapTable(ctx, project, sp.Name, "weave:///"+project+"/table/"+tbl.Digest); err != nil {
			return "", nil, err
		}
	default:
		return "", nil, fault.Invalid(param, "%s %q: use a weave:/// Dataset or table ref, or an uploaded file (hone-file:///…)", param, u)
	}
	exs, err := s.examples(ctx, ref, sp)
	if err != nil {
		return "", nil, fault.Invalid(param, "%s %s: %v", param, u, err)
	}
	return ref, exs, nil
}

// wrapTable publishes a Dataset "<name>-data" whose rows are table, and returns its ref.
func (s *Service) wrapTable(ctx context.Context, project, name, table string) (string, error) {
	o := (&object{}).add("_type", "Dataset").add("name", name+"-data").
		add("description", "The rows of evaluation "+name+" (Hone)").add("rows", table).
		add("_class_name", "Dataset").add("_bases", []string{"Object", "BaseModel"})
	val, _ := json.Marshal(o)
	return s.publish(ctx, project, name+"-data", "object", val)
}

// maxRows bounds the rows of one evaluation.
const maxRows = 100000

// examples reads the rows of a Dataset ref (with their digests) and parses and checks them
// against the spec.
func (s *Service) examples(ctx context.Context, datasetRef string, sp Spec) ([]*example, error) {
	r, err := trace.ParseRef(datasetRef)
	if err != nil {
		return nil, err
	}
	project := r.Entity + "/" + r.Project
	obj, err := s.Trace.ObjRead(ctx, trace.ObjReadReq{ProjectID: project, ObjectID: r.Name, Digest: r.Digest})
	if err != nil {
		return nil, err
	}
	var val struct {
		Rows string `json:"rows"`
	}
	json.Unmarshal(obj.Obj.Val, &val)
	rows, err := trace.ParseRef(val.Rows)
	if err != nil || rows.Kind != "table" || rows.Entity+"/"+rows.Project != project {
		return nil, fmt.Errorf("it is not a Dataset of this project (it has no rows table)")
	}
	var out []*example
	const page = 1000
	for offset := 0; ; offset += page {
		limit, off := page, offset
		res, err := s.Trace.TableQuery(ctx, trace.TableQueryReq{ProjectID: project, Digest: rows.Digest, Limit: &limit, Offset: &off})
		if err != nil {
			return nil, err
		}
		for _, row := range res.Rows {
			if sp.Limit > 0 && len(out) >= sp.Limit {
				break
			}
			ex, err := parseExample(len(out), row.Val, sp.InputField)
			if err != nil {
				return nil, err
			}
			if err := ex.check(sp.Scorers, ""); err != nil {
				return nil, err
			}
			ex.ref = datasetRef + "/attr/rows/id/" + row.Digest
			out = append(out, ex)
			if len(out) > maxRows {
				return nil, fmt.Errorf("it has more than %d rows: evaluate a part of it with limit", maxRows)
			}
		}
		if len(res.Rows) < page || (sp.Limit > 0 && len(out) >= sp.Limit) {
			break
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("it has no rows")
	}
	return out, nil
}

// CheckJobEvaluation implements training.EvaluationChecker: the evaluation a training job of
// model m names (an Evaluation ref as a JSON string, or an inline spec object) and the alias
// it may promote, validated and stored now; the answer is the job payload's evaluation.
func (s *Service) CheckJobEvaluation(ctx context.Context, m registry.Model, evaluation json.RawMessage, promote string) (json.RawMessage, error) {
	project := m.Entity + "/" + m.Project
	var je JobEvaluation
	var err error
	var ref string
	trimmed := bytes.TrimSpace(evaluation)
	switch {
	case len(trimmed) == 0 || string(trimmed) == "null":
		if promote == "" {
			return nil, nil
		}
		if s.Promoter == nil {
			return nil, fault.Invalid("promote", "promote needs an alias with a promotion rule")
		}
		if ref, err = s.Promoter.RuleEvaluation(ctx, m.ID, promote, "promote"); err != nil {
			return nil, err
		}
		je, err = s.prepare(ctx, m.Entity, project, ref, nil, "evaluation")
	case json.Unmarshal(trimmed, &ref) == nil:
		je, err = s.prepare(ctx, m.Entity, project, ref, nil, "evaluation")
	default:
		var obj map[string]json.RawMessage
		if json.Unmarshal(trimmed, &obj) != nil {
			return nil, fault.Invalid("evaluation", "evaluation must be the ref of an Evaluation Hone stored, or an evaluation's fields {name, dataset, scorers, ...}")
		}
		if p, ok := obj["project"]; ok {
			var ps string
			json.Unmarshal(p, &ps)
			if project, err = s.project(m.Entity, ps, Target{Project: project}, "evaluation.project"); err != nil {
				return nil, err
			}
			delete(obj, "project")
		}
		for _, k := range []string{"model", "evaluation", "promote"} {
			if _, ok := obj[k]; ok {
				return nil, fault.Invalid("evaluation."+k, "evaluation.%s is not a field of a training job's evaluation (it evaluates the job's new checkpoint)", k)
			}
		}
		b, _ := json.Marshal(obj)
		je, err = s.prepare(ctx, m.Entity, project, "", b, "evaluation")
	}
	if err != nil {
		return nil, err
	}
	if promote != "" {
		if s.Promoter == nil {
			return nil, fault.Invalid("promote", "promote needs an alias with a promotion rule")
		}
		if err := s.Promoter.CheckPromote(ctx, m.ID, promote, je.EvaluationRef, je.Spec, "promote"); err != nil {
			return nil, err
		}
		je.Promote = promote
	}
	return json.Marshal(je)
}

// JobView is an evaluation job as the API shows it: the job, what it evaluates, and its
// runs (with their summaries once they ended).
type JobView struct {
	ID            string      `json:"id"`
	Object        string      `json:"object"`
	Model         string      `json:"model"`
	ModelName     string      `json:"model_name"`
	ModelID       string      `json:"model_id,omitempty"`
	Step          *int        `json:"step"`
	Status        string      `json:"status"`
	Project       string      `json:"project"`
	Evaluation    string      `json:"evaluation"`
	EvaluationRef string      `json:"evaluation_ref"`
	Promote       string      `json:"promote,omitempty"`
	CreatedAt     string      `json:"created_at"`
	StartedAt     *string     `json:"started_at"`
	FinishedAt    *string     `json:"finished_at"`
	ErrorMessage  *string     `json:"error_message"`
	Attempt       int         `json:"attempt"`
	Runs          []RunRecord `json:"runs"`
	// Summary and Metrics are the evaluated model's run's (the first run), once it ended.
	Summary json.RawMessage    `json:"summary,omitempty"`
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// URL is the run's page in Hone Studio (its path).
	URL string `json:"url,omitempty"`
}

// Job finds an evaluation job of entity (another entity's, or a job of another kind, is
// not found).
func (s *Service) Job(ctx context.Context, entity, id string) (jobs.Job, error) {
	j, err := s.Queue.Get(ctx, id)
	if errors.Is(err, jobs.ErrNotFound) || (err == nil && (j.Entity != entity || j.Kind != Kind)) {
		return jobs.Job{}, fault.NotFound("evaluation_job_id", "Evaluation job %s not found", id)
	}
	return j, err
}

// View is an evaluation job as the API shows it.
func (s *Service) View(ctx context.Context, j jobs.Job) (JobView, error) {
	var je JobEvaluation
	json.Unmarshal(j.Payload, &je)
	v := JobView{ID: j.ID, Object: "evaluation_job", Model: je.Target.Requested, ModelName: je.Target.Name, ModelID: je.Target.ModelID,
		Step: je.Target.Step, Status: j.Status, Project: je.Project, Evaluation: je.Spec.Name, EvaluationRef: je.EvaluationRef,
		Promote: je.Promote, CreatedAt: j.CreatedAt, StartedAt: j.StartedAt, FinishedAt: j.FinishedAt, ErrorMessage: j.ErrorMessage, Attempt: j.Attempt}
	runs, err := s.JobRuns(ctx, j.ID)
	if err != nil {
		return v, err
	}
	v.Runs = runs
	if len(runs) > 0 {
		v.Summary, v.Metrics = runs[0].Summary, runs[0].Metrics
		v.URL = "/" + runs[0].Project + "/weave/calls/" + runs[0].ID
	}
	return v, nil
}

// LoadEvaluation reads an Evaluation Hone stored, by its ref (any version selector), for
// entity: its project, its ref with the digest, and its spec. param names the field of the
// faults (not found, another entity's, not Hone's).
func (s *Service) LoadEvaluation(ctx context.Context, entity, ref, param string) (JobEvaluation, error) {
	if ref == "" {
		return JobEvaluation{}, fault.Invalid(param, "%s is required: the ref of an Evaluation Hone stored (weave:///<entity>/<project>/object/<name>:<version>)", param)
	}
	return s.prepare(ctx, entity, "", ref, nil, param)
}
