package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/honeai/hone/internal/evaluation"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/registry"
)

// Rule is an alias's promotion rule: the alias moves to a candidate checkpoint only when the
// candidate's run of Evaluation beats the current checkpoint's on Metric by more than Margin.
type Rule struct {
	// Evaluation is the ref of an Evaluation Hone stored, with its digest (a version
	// selector given when the rule is set is resolved then: both sides are scored alike).
	Evaluation string  `json:"evaluation"`
	Metric     string  `json:"metric"`
	Margin     float64 `json:"margin"`
	// HigherIsBetter (default true; false for model_latency) says which way beats.
	HigherIsBetter *bool `json:"higher_is_better,omitempty"`
}

func (r Rule) higher() bool {
	if r.HigherIsBetter != nil {
		return *r.HigherIsBetter
	}
	return r.Metric != "model_latency"
}

// beats reports whether a candidate's score beats the current one's by more than the margin.
func (r Rule) beats(candidate, current float64) bool {
	if r.higher() {
		return candidate > current+r.Margin
	}
	return candidate < current-r.Margin
}

// AliasView is an alias as the API shows it.
type AliasView struct {
	registry.Alias
	// Model is the model (<entity>/<project>/<name>); Name what chat takes (…:<alias>) and
	// Serves the checkpoint it resolves to now (…:step<N>).
	Model  string `json:"model"`
	Name   string `json:"name"`
	Serves string `json:"serves"`
}

func modelRef(m registry.Model) string { return m.Entity + "/" + m.Project + "/" + m.Name }

func view(m registry.Model, a registry.Alias) AliasView {
	return AliasView{Alias: a, Model: modelRef(m), Name: modelRef(m) + ":" + a.Name, Serves: fmt.Sprintf("%s:step%d", modelRef(m), a.Step)}
}

func checkName(name string) error {
	if !registry.ValidAliasName(name) {
		return fault.Invalid("alias", "alias %q must be 1-64 lower-case letters, digits, '_', '-' or '.', starting with a letter or digit, and not latest or step<N>", name)
	}
	return nil
}

// Aliases lists a model's aliases.
func (s *Service) Aliases(ctx context.Context, m registry.Model) ([]AliasView, error) {
	as, err := s.Reg.Aliases(ctx, m.ID)
	if err != nil {
		return nil, err
	}
	out := make([]AliasView, 0, len(as))
	for _, a := range as {
		out = append(out, view(m, a))
	}
	return out, nil
}

// Alias finds one alias of a model (a fault naming alias when there is none).
func (s *Service) Alias(ctx context.Context, m registry.Model, name string) (AliasView, error) {
	a, err := s.Reg.Alias(ctx, m.ID, name)
	if errors.Is(err, registry.ErrNotFound) {
		return AliasView{}, fault.NotFound("alias", "%s has no alias %q", modelRef(m), name)
	}
	return view(m, a), err
}

// noStep is the fault for a step that is not a checkpoint of the model.
func (s *Service) noStep(ctx context.Context, m registry.Model, step int) error {
	cs, _ := s.Reg.AllCheckpoints(ctx, m.ID)
	var steps []string
	for _, c := range cs {
		steps = append(steps, fmt.Sprint(c.Step))
	}
	have := "it has no checkpoints yet (step 0 is the base model)"
	if len(steps) > 0 {
		have = "its checkpoints are steps " + strings.Join(steps, ", ") + " (step 0 is the base model)"
	}
	return fault.Invalid("step", "%s has no checkpoint step %d: %s", modelRef(m), step, have)
}

// MoveAlias points an alias at step (creating it), by hand: actor and reason are recorded.
func (s *Service) MoveAlias(ctx context.Context, m registry.Model, name string, step int, actor, reason string) (AliasView, error) {
	if err := checkName(name); err != nil {
		return AliasView{}, err
	}
	if step < 0 {
		return AliasView{}, fault.Invalid("step", "step must be 0 (the base model) or a checkpoint step, got %d", step)
	}
	a, err := s.Reg.MoveAlias(ctx, m.ID, name, step, registry.AliasEvent{Kind: registry.AliasSet, Actor: actor, Reason: reason}, nil)
	if errors.Is(err, registry.ErrNoStep) {
		return AliasView{}, s.noStep(ctx, m, step)
	}
	return view(m, a), err
}

// Rollback moves an alias back to the step it pointed at before it was last moved there.
func (s *Service) Rollback(ctx context.Context, m registry.Model, name, actor, reason string) (AliasView, error) {
	cur, err := s.Alias(ctx, m, name)
	if err != nil {
		return AliasView{}, err
	}
	evs, _, err := s.Reg.AliasEvents(ctx, m.ID, name, "", 1000)
	if err != nil {
		return AliasView{}, err
	}
	target := -1
	for _, e := range evs { // newest first: the move that put it where it is
		if (e.Kind == registry.AliasSet || e.Kind == registry.AliasRollback || e.Kind == registry.AliasPromoted) && e.To != nil && *e.To == cur.Step && e.From != nil && *e.From != cur.Step {
			target = *e.From
			break
		}
	}
	if target < 0 {
		return AliasView{}, fault.Conflict("alias", "%s:%s has pointed at step %d since it was created: there is nothing to roll back to", modelRef(m), name, cur.Step)
	}
	if reason == "" {
		reason = fmt.Sprintf("rolled back from step %d", cur.Step)
	}
	expect := cur.Step
	a, err := s.Reg.MoveAlias(ctx, m.ID, name, target, registry.AliasEvent{Kind: registry.AliasRollback, Actor: actor, Reason: reason}, &expect)
	switch {
	case errors.Is(err, registry.ErrNoStep):
		return AliasView{}, fault.Conflict("alias", "%s:%s cannot roll back to step %d: that checkpoint was deleted", modelRef(m), name, target)
	case errors.Is(err, registry.ErrAliasMoved):
		return AliasView{}, fault.Conflict("alias", "%s:%s moved while rolling back: read it again", modelRef(m), name)
	}
	return view(m, a), err
}

// DeleteAlias removes an alias (its history stays).
func (s *Service) DeleteAlias(ctx context.Context, m registry.Model, name, actor, reason string) error {
	err := s.Reg.DeleteAlias(ctx, m.ID, name, registry.AliasEvent{Actor: actor, Reason: reason})
	if errors.Is(err, registry.ErrNotFound) {
		return fault.NotFound("alias", "%s has no alias %q", modelRef(m), name)
	}
	return err
}

// History lists an alias's events (every alias's with name ""), newest first.
func (s *Service) History(ctx context.Context, m registry.Model, name, before string, limit int) ([]registry.AliasEvent, bool, error) {
	evs, more, err := s.Reg.AliasEvents(ctx, m.ID, name, before, limit)
	return evs, more, err
}

// ParseRule checks a promotion rule for a model of entity: its evaluation must be one Hone
// stored (resolved to its digest), its metric one the evaluation produces, its margin a
// finite number at least 0. Faults name rule.<field>.
func (s *Service) ParseRule(ctx context.Context, m registry.Model, raw json.RawMessage) (Rule, evaluation.JobEvaluation, error) {
	var r Rule
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields == nil {
		return r, evaluation.JobEvaluation{}, fault.Invalid("rule", "rule must be an object {evaluation, metric, margin, higher_is_better}")
	}
	for k := range fields {
		switch k {
		case "evaluation", "metric", "margin", "higher_is_better":
		default:
			return r, evaluation.JobEvaluation{}, fault.Invalid("rule."+k, "rule.%s is not a field of a promotion rule (evaluation, metric, margin, higher_is_better)", k)
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&r); err != nil {
		return r, evaluation.JobEvaluation{}, fault.JSON(err, "rule")
	}
	je, err := s.Evals.LoadEvaluation(ctx, m.Entity, r.Evaluation, "rule.evaluation")
	if err != nil {
		return r, je, err
	}
	r.Evaluation = je.EvaluationRef
	if r.Metric == "" || !je.Spec.Produces(r.Metric) {
		return r, je, fault.Invalid("rule.metric", "rule.metric %q is not a metric evaluation %s produces (%s)", r.Metric, je.Spec.Name, strings.Join(je.Spec.Metrics(), ", "))
	}
	if r.Margin < 0 || math.IsNaN(r.Margin) || math.IsInf(r.Margin, 0) {
		return r, je, fault.Invalid("rule.margin", "rule.margin must be a finite number at least 0, got %v", r.Margin)
	}
	return r, je, nil
}

// SetRule sets (raw) or removes (raw nil) an alias's promotion rule.
func (s *Service) SetRule(ctx context.Context, m registry.Model, name string, raw json.RawMessage, actor, reason string) (AliasView, error) {
	if _, err := s.Alias(ctx, m, name); err != nil {
		return AliasView{}, err
	}
	var stored json.RawMessage
	if raw != nil {
		r, je, err := s.ParseRule(ctx, m, raw)
		if err != nil {
			return AliasView{}, err
		}
		stored, _ = json.Marshal(r)
		if reason == "" {
			reason = fmt.Sprintf("promote when %s's %s beats the current checkpoint's by more than %g", je.Spec.Name, r.Metric, r.Margin)
		}
	} else if reason == "" {
		reason = "promotion rule removed"
	}
	a, err := s.Reg.SetAliasRule(ctx, m.ID, name, stored, registry.AliasEvent{Kind: registry.AliasRule, Actor: actor, Reason: reason, Data: stored})
	return view(m, a), err
}

// rule reads an alias's rule (a fault naming param when the alias or its rule is missing).
func (s *Service) rule(ctx context.Context, modelID, alias, param string) (registry.Alias, Rule, error) {
	a, err := s.Reg.Alias(ctx, modelID, alias)
	if errors.Is(err, registry.ErrNotFound) {
		return a, Rule{}, fault.NotFound(param, "the model has no alias %q", alias)
	}
	if err != nil {
		return a, Rule{}, err
	}
	if len(a.Rule) == 0 {
		return a, Rule{}, fault.Invalid(param, "alias %q has no promotion rule: set one (PUT …/aliases/%s/rule) to promote by evaluation", alias, alias)
	}
	var r Rule
	if err := json.Unmarshal(a.Rule, &r); err != nil {
		return a, r, fmt.Errorf("alias %s's rule is not readable: %w", alias, err)
	}
	return a, r, nil
}

// CheckPromote implements evaluation.Promoter: alias has a rule, decided by this evaluation.
func (s *Service) CheckPromote(ctx context.Context, modelID, alias, evaluationRef string, spec evaluation.Spec, param string) error {
	_, r, err := s.rule(ctx, modelID, alias, param)
	if err != nil {
		return err
	}
	if r.Evaluation != evaluationRef {
		return fault.Invalid(param, "alias %q is promoted by evaluation %s; this job's is %s: name that one (or none, in a training job)", alias, r.Evaluation, evaluationRef)
	}
	if !spec.Produces(r.Metric) {
		return fault.Invalid(param, "alias %q's rule compares %s, which evaluation %s does not produce", alias, r.Metric, spec.Name)
	}
	return nil
}

// RuleEvaluation implements evaluation.Promoter: the ref of the Evaluation alias's rule
// decides by.
func (s *Service) RuleEvaluation(ctx context.Context, modelID, alias, param string) (string, error) {
	_, r, err := s.rule(ctx, modelID, alias, param)
	return r.Evaluation, err
}

// Decision is what a promotion rule decided, recorded on the alias and as the job's event.
type Decision struct {
	Alias          string  `json:"alias"`
	Promoted       bool    `json:"promoted"`
	Metric         string  `json:"metric"`
	Margin         float64 `json:"margin"`
	HigherIsBetter bool    `json:"higher_is_better"`
	Evaluation     string  `json:"evaluation"`
	CandidateStep  int     `json:"candidate_step"`
	// CandidateScore and CurrentScore are nil when the run produced no value.
	CandidateScore *float64 `json:"candidate_score"`
	CurrentStep    int      `json:"current_step"`
	CurrentScore   *float64 `json:"current_score"`
	CandidateCall  string   `json:"candidate_call_id"`
	CurrentCall    string   `json:"current_call_id,omitempty"`
	JobID          string   `json:"job_id"`
	Message        string   `json:"message"`
}

// EventPromotion is the job event of a promotion decision (Decision).
const EventPromotion = "promotion_decided"

// Promote implements evaluation.Promoter: after the candidate checkpoint's evaluation run, it
// finds the current checkpoint's score with the same Evaluation (a run recorded before, or
// it evaluates it now), and moves the alias when the candidate beats it by the rule; the
// decision and both scores are recorded as an alias event and as the job's event. A job that
// runs again after deciding does not decide twice.
func (s *Service) Promote(ctx context.Context, j jobs.Job, alias string, je evaluation.JobEvaluation, cand evaluation.RunRecord, progress func(string, any)) error {
	if data, ok := s.Evals.PriorEvent(ctx, j.ID, EventPromotion); ok {
		var d Decision
		if json.Unmarshal(data, &d) == nil && d.Alias == alias {
			return nil
		}
	}
	m, err := s.Reg.Get(ctx, j.ModelID)
	if err != nil {
		return err
	}
	a, r, err := s.rule(ctx, m.ID, alias, "promote")
	if err != nil {
		return fmt.Errorf("promoting %s: %w", alias, err)
	}
	if cand.Step == nil {
		return fmt.Errorf("promoting %s: the evaluated model is not a checkpoint of %s", alias, modelRef(m))
	}
	d := Decision{Alias: alias, Metric: r.Metric, Margin: r.Margin, HigherIsBetter: r.higher(), Evaluation: r.Evaluation,
		CandidateStep: *cand.Step, CurrentStep: a.Step, CandidateCall: cand.ID, JobID: j.ID}
	if v, ok := cand.Metrics[r.Metric]; ok {
		d.CandidateScore = &v
	}
	actor := "job " + j.ID
	record := func(kind, reason string, moved bool) error {
		d.Message = fmt.Sprintf("%s:%s %s", modelRef(m), alias, reason)
		data, _ := json.Marshal(d)
		ev := registry.AliasEvent{Kind: kind, Actor: actor, Reason: reason, Data: data}
		if moved {
			expect := a.Step
			_, err := s.Reg.MoveAlias(ctx, m.ID, alias, d.CandidateStep, ev, &expect)
			if errors.Is(err, registry.ErrAliasMoved) {
				d.Promoted = false
				return nil // record below as kept
			}
			if err != nil {
				return err
			}
		} else {
			from, to := a.Step, a.Step
			ev.Alias, ev.From, ev.To = alias, &from, &to
			if _, err := s.Reg.RecordAliasEvent(ctx, m.ID, ev); err != nil {
				return err
			}
		}
		progress(EventPromotion, d)
		return nil
	}
	if d.CandidateStep == a.Step {
		return record(registry.AliasKept, fmt.Sprintf("already points at step %d", a.Step), false)
	}
	if r.Evaluation != cand.EvaluationRef {
		return record(registry.AliasKept, fmt.Sprintf("kept at step %d: the candidate was evaluated with %s, not the rule's %s", a.Step, cand.EvaluationRef, r.Evaluation), false)
	}
	cur, err := s.Evals.LatestRun(ctx, m.ID, a.Step, r.Evaluation)
	if errors.Is(err, evaluation.ErrNotFound) {
		// The current checkpoint has no run of this Evaluation yet: evaluate it now, in this job.
		cur, err = s.Evals.Evaluate(ctx, j, "current", je, evaluation.CheckpointTarget(m, a.Step), progress)
	}
	if err != nil {
		return fmt.Errorf("evaluating %s:%s's current checkpoint (step %d): %w", modelRef(m), alias, a.Step, err)
	}
	d.CurrentCall = cur.ID
	if v, ok := cur.Metrics[r.Metric]; ok {
		d.CurrentScore = &v
	}
	switch {
	case d.CandidateScore == nil:
		return record(registry.AliasKept, fmt.Sprintf("kept at step %d: step %d's evaluation gave no %s", a.Step, d.CandidateStep, r.Metric), false)
	case d.CurrentScore == nil || r.beats(*d.CandidateScore, *d.CurrentScore):
		d.Promoted = true
		cs := "none"
		if d.CurrentScore != nil {
			cs = fmt.Sprintf("%.4g", *d.CurrentScore)
		}
		err := record(registry.AliasPromoted, fmt.Sprintf("promoted from step %d to step %d: %s %.4g beats %s by more than %g", a.Step, d.CandidateStep, r.Metric, *d.CandidateScore, cs, r.Margin), true)
		if err != nil || d.Promoted {
			return err
		}
		now, _ := s.Reg.Alias(ctx, m.ID, alias)
		return record(registry.AliasKept, fmt.Sprintf("kept at step %d: it moved there while step %d was evaluated", now.Step, d.CandidateStep), false)
	default:
		return record(registry.AliasKept, fmt.Sprintf("kept at step %d: step %d's %s %.4g does not beat %.4g by more than %g", a.Step, d.CandidateStep, r.Metric, *d.CandidateScore, *d.CurrentScore, r.Margin), false)
	}
}
