package evaluation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/trace"
	"github.com/honeai/hone/internal/training"
)

// Runner wraps the training runner: evaluation jobs run here, and a training job that names
// an evaluation runs it on its new checkpoint after training (next) saved it.
func (s *Service) Runner(next jobs.Runner) jobs.Runner {
	return func(ctx context.Context, j jobs.Job, progress func(string, any)) (*int, error) {
		if j.Kind == Kind {
			return s.runJob(ctx, j, progress)
		}
		raw := training.JobEvaluation(j)
		if raw == nil {
			return next(ctx, j, progress)
		}
		var je JobEvaluation
		if err := json.Unmarshal(raw, &je); err != nil {
			return nil, fmt.Errorf("the job's evaluation is not readable: %w", err)
		}
		return s.trainThenEvaluate(ctx, j, je, next, progress)
	}
}

// runJob runs an evaluation job.
func (s *Service) runJob(ctx context.Context, j jobs.Job, progress func(string, any)) (*int, error) {
	var je JobEvaluation
	if err := json.Unmarshal(j.Payload, &je); err != nil {
		return nil, fmt.Errorf("the job's payload is not readable: %w", err)
	}
	rec, err := s.Evaluate(ctx, j, "", je, je.Target, progress)
	if err != nil {
		return nil, err
	}
	if err := s.promote(ctx, j, je, rec, progress); err != nil {
		return nil, err
	}
	return je.Target.Step, nil
}

// trainThenEvaluate runs a training job (unless an earlier run of it saved its checkpoint
// already) and evaluates the checkpoint it saved.
func (s *Service) trainThenEvaluate(ctx context.Context, j jobs.Job, je JobEvaluation, next jobs.Runner, progress func(string, any)) (*int, error) {
	var step *int
	if data, ok := s.PriorEvent(ctx, j.ID, EventCheckpointSaved); ok {
		var d struct {
			Step int `json:"step"`
		}
		if json.Unmarshal(data, &d) == nil && d.Step > 0 {
			step = &d.Step
		}
	}
	if step == nil {
		st, err := next(ctx, j, progress)
		if err != nil || st == nil {
			return st, err
		}
		step = st
		progress(EventCheckpointSaved, map[string]any{"step": *step, "message": fmt.Sprintf("checkpoint step %d saved; evaluating it with %s", *step, je.Spec.Name)})
	}
	m, err := s.Reg.Get(ctx, j.ModelID)
	if err != nil {
		return nil, fmt.Errorf("the job's model is gone: %w", err)
	}
	t := CheckpointTarget(m, *step)
	rec, err := s.Evaluate(ctx, j, "checkpoint", je, t, progress)
	if err != nil {
		if errors.Is(err, jobs.ErrCancelled) || ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("checkpoint step %d was saved, but its evaluation failed: %w", *step, err)
	}
	if err := s.promote(ctx, j, je, rec, progress); err != nil {
		return nil, err
	}
	return step, nil
}

// CheckpointTarget is step of a trainable model as an evaluation target.
func CheckpointTarget(m registry.Model, step int) Target {
	name := fmt.Sprintf("%s/%s/%s:step%d", m.Entity, m.Project, m.Name, step)
	return Target{Requested: name, Name: name, BaseModel: m.BaseModel, ModelID: m.ID, Project: m.Entity + "/" + m.Project, Step: &step}
}

func (s *Service) promote(ctx context.Context, j jobs.Job, je JobEvaluation, rec RunRecord, progress func(string, any)) error {
	if je.Promote == "" || s.Promoter == nil {
		return nil
	}
	return s.Promoter.Promote(ctx, j, je.Promote, je, rec, progress)
}

// PriorEvent finds the latest event of a type that job jobID recorded (in any run).
func (s *Service) PriorEvent(ctx context.Context, jobID, typ string) (json.RawMessage, bool) {
	var found json.RawMessage
	after := ""
	for {
		evs, more, err := s.Queue.Events(ctx, jobID, after, 100)
		if err != nil {
			return nil, false
		}
		for _, e := range evs {
			if e.Type == typ {
				found = e.Data
			}
		}
		if !more || len(evs) == 0 {
			return found, found != nil
		}
		after = evs[len(evs)-1].ID
	}
}

// done is a row an earlier run of the job recorded.
type done struct {
	result rowResult
}

// Evaluate runs the evaluation je on target t as part of job j (label tells the runs of one
// job apart): it records the Weave calls, the run (eval_runs) and, for a checkpoint, the
// metrics on the checkpoint (eval/<evaluation>/<metric>). A run of the job that starts again
// goes on from the rows recorded before; one that finished is not run again.
func (s *Service) Evaluate(ctx context.Context, j jobs.Job, label string, je JobEvaluation, t Target, progress func(string, any)) (RunRecord, error) {
	callID, traceID := runCallID(j.ID, label)
	project := je.Project
	rec := RunRecord{ID: callID, JobID: j.ID, Label: label, Entity: j.Entity, Project: project, ModelID: t.ModelID, BaseModel: t.BaseModel,
		Model: t.Name, Step: t.Step, EvaluationRef: je.EvaluationRef, EvaluationName: je.Spec.Name, CreatedAt: db.FormatTime(s.now())}
	sp := je.Spec
	exs, err := s.examples(ctx, sp.Dataset, sp)
	if err != nil {
		return rec, fmt.Errorf("the evaluation's dataset %s: %w", sp.Dataset, err)
	}
	scorers := make([]*scorer, len(sp.Scorers))
	for i, sc := range sp.Scorers {
		if scorers[i], err = compile(sc); err != nil {
			return rec, err
		}
	}
	judges := map[string]string{} // scorer name → the judge model's exact name
	for _, sc := range sp.Scorers {
		if sc.Type == Judge {
			jt, err := s.ResolveTarget(ctx, j.Entity, sc.Model, "model")
			if err != nil {
				return rec, fmt.Errorf("the judge of scorer %s: %w", sc.Name, err)
			}
			judges[sc.Name] = jt.Name
		}
	}
	modelRef, err := s.publishModel(ctx, project, t, sp.Generation)
	if err != nil {
		return rec, err
	}
	scorerRefs := map[string][2]string{}
	for _, sc := range sp.Scorers {
		o, op, err := s.publishScorer(ctx, project, sc)
		if err != nil {
			return rec, err
		}
		scorerRefs[sc.Name] = [2]string{o, op}
	}
	ops := map[string]string{}
	for _, op := range []string{opEvaluate, opPredScore, opSummarize, opPredict} {
		if ops[op], err = s.publishOp(ctx, project, op); err != nil {
			return rec, err
		}
	}
	attrs := evalAttributes(j.ID)

	// An earlier run of the job: its calls are the record of what is done.
	prior := map[string]done{}
	existing, err := s.Trace.CallRead(ctx, trace.CallReadReq{ProjectID: project, ID: callID})
	switch {
	case err == nil && existing.Call != nil && existing.Call.EndedAt != nil && existing.Call.Exception == nil:
		// It finished (its worker went before the job did): its summary stands.
		summary := existing.Call.Output
		metrics := Metrics(summary)
		if err := s.startRun(ctx, rec); err != nil {
			return rec, err
		}
		if err := s.finishRun(ctx, callID, summary, metrics); err != nil {
			return rec, err
		}
		return s.ended(ctx, rec, t, summary, metrics, progress)
	case err == nil && existing.Call != nil:
		if prior, err = s.recorded(ctx, project, callID); err != nil {
			return rec, err
		}
	default:
		inputs, _ := json.Marshal(map[string]string{"self": je.EvaluationRef, "model": modelRef})
		start := trace.StartedCallSchemaForInsert{ProjectID: project, ID: &callID, TraceID: &traceID, OpName: ops[opEvaluate],
			StartedAt: db.FormatTime(s.now()), Attributes: attrs, Inputs: inputs}
		display := t.Name
		start.DisplayName = &display
		if _, err := s.Trace.CallStart(ctx, trace.CallStartReq{Start: start}); err != nil {
			return rec, err
		}
	}
	if err := s.startRun(ctx, rec); err != nil {
		return rec, err
	}
	progress(EventStarted, map[string]any{"evaluation": sp.Name, "evaluation_ref": je.EvaluationRef, "model": t.Name, "label": label,
		"num_rows": len(exs), "done_rows": len(prior), "call_id": callID, "project": project})

	results := make([]rowResult, len(exs))
	var todo []*example
	for _, ex := range exs {
		if d, ok := prior[ex.ref]; ok {
			results[ex.index] = d.result
		} else {
			todo = append(todo, ex)
		}
	}
	var mu sync.Mutex
	finished := len(exs) - len(todo)
	every := max(1, len(exs)/100)
	report := func() {
		// Under mu: the running means of what is scored so far.
		var scored []rowResult
		for _, r := range results {
			if r.Scores != nil {
				scored = append(scored, r)
			}
		}
		progress(EventProgress, map[string]any{"model": t.Name, "label": label, "rows_done": finished, "num_rows": len(exs),
			"scores": Metrics(mustJSON(summarize(sp.Scorers, scored)))})
	}
	conc := sp.Generation.Concurrency
	if conc == 0 {
		conc = 8
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan *example)
	var firstErr error
	var wg sync.WaitGroup
	for range min(conc, max(1, len(todo))) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ex := range work {
				r, err := s.row(rctx, j, project, callID, traceID, attrs, ops, modelRef, je, t, ex, scorers, scorerRefs, judges)
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					cancel()
					mu.Unlock()
					continue
				}
				results[ex.index] = r
				finished++
				if finished%every == 0 || finished == len(exs) {
					report()
				}
				mu.Unlock()
			}
		}()
	}
feed:
	for _, ex := range todo {
		select {
		case work <- ex:
		case <-rctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	if ctx.Err() != nil {
		return rec, jobs.ErrCancelled
	}
	if firstErr != nil {
		return rec, firstErr
	}

	summary := mustJSON(summarize(sp.Scorers, results))
	metrics := Metrics(summary)
	now := s.now()
	sumID, _ := runCallID(j.ID, label+"/summarize")
	inputs, _ := json.Marshal(map[string]string{"self": je.EvaluationRef})
	a, b := callPair(project, sumID, traceID, callID, ops[opSummarize], "", now, now, attrs, inputs, json.RawMessage(summary), nil, "")
	if _, err := s.Trace.CallUpsertBatch(ctx, trace.CallCreateBatchReq{Batch: []trace.CallBatchItem{a, b}}, func(string, string) error { return nil }); err != nil {
		return rec, err
	}
	end := trace.EndedCallSchemaForInsert{ProjectID: project, ID: callID, EndedAt: db.FormatTime(s.now()), Output: summary,
		Summary: json.RawMessage(`{}`), TraceID: &traceID}
	if err := s.Trace.CallEnd(ctx, trace.CallEndReq{End: end}); err != nil {
		return rec, err
	}
	if err := s.finishRun(ctx, callID, summary, metrics); err != nil {
		return rec, err
	}
	return s.ended(ctx, rec, t, summary, metrics, progress)
}

// ended records a finished run's metrics on its checkpoint and reports it.
func (s *Service) ended(ctx context.Context, rec RunRecord, t Target, summary json.RawMessage, metrics map[string]float64, progress func(string, any)) (RunRecord, error) {
	rec.Status, rec.Summary, rec.Metrics = RunFinished, summary, metrics
	f := db.FormatTime(s.now())
	rec.FinishedAt = &f
	if t.ModelID != "" && t.Step != nil && *t.Step > 0 {
		named := map[string]float64{}
		for k, v := range metrics {
			named[CheckpointMetric(rec.EvaluationName, k)] = v
		}
		if err := s.Reg.MergeMetrics(ctx, t.ModelID, *t.Step, named); err != nil && !errors.Is(err, registry.ErrNotFound) {
			return rec, err
		}
	}
	progress(EventEnded, map[string]any{"model": t.Name, "label": rec.Label, "step": t.Step, "evaluation": rec.EvaluationName,
		"evaluation_ref": rec.EvaluationRef, "call_id": rec.ID, "project": rec.Project, "summary": summary, "metrics": metrics})
	return rec, nil
}

// CheckpointMetric is the name under which an evaluation's metric lands in a checkpoint's
// metrics (as ART's val/ metrics do): eval/<evaluation>/<metric>.
func CheckpointMetric(evaluation, metric string) string {
	return "eval/" + evaluation + "/" + metric
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// recorded reads the rows an earlier run of the evaluation recorded: its predict_and_score
// calls, by example ref.
func (s *Service) recorded(ctx context.Context, project, callID string) (map[string]done, error) {
	out := map[string]done{}
	err := s.Trace.CallsQuery(ctx, trace.CallsQueryReq{ProjectID: project, Filter: &trace.CallsFilter{ParentIDs: []string{callID}},
		Columns: []string{"id", "op_name", "inputs", "output", "ended_at"}}, func(c trace.CallSchema) error {
		var in struct {
			Example string `json:"example"`
		}
		var out1 struct {
			Scores       map[string]any `json:"scores"`
			ModelLatency float64        `json:"model_latency"`
		}
		if json.Unmarshal(c.Inputs, &in) != nil || in.Example == "" || c.EndedAt == nil {
			return nil
		}
		if json.Unmarshal(c.Output, &out1) != nil || out1.Scores == nil {
			return nil
		}
		out[in.Example] = done{result: rowResult{Scores: out1.Scores, Latency: out1.ModelLatency}}
		return nil
	})
	return out, err
}

// row asks the model one row, scores its reply and records the row's calls (the
// predict_and_score call, its predict call, a call per scorer, in one batch) and the
// scorers' feedback. A request the chat API refuses (a prompt too long, say) is the row's
// exception, scored as a failure; any other error stops the run.
func (s *Service) row(ctx context.Context, j jobs.Job, project, parentID, traceID string, attrs json.RawMessage, ops map[string]string,
	modelRef string, je JobEvaluation, t Target, ex *example, scorers []*scorer, scorerRefs map[string][2]string, judges map[string]string) (rowResult, error) {
	sp := je.Spec
	g := sp.Generation
	msgs := ex.prompt
	if g.System != "" {
		sys, _ := json.Marshal(map[string]string{"role": "system", "content": g.System})
		msgs = append([]json.RawMessage{sys}, msgs...)
	}
	req := map[string]any{"model": t.Name, "messages": msgs}
	maxTokens, temp := 256, 0.0
	if g.MaxTokens != nil {
		maxTokens = *g.MaxTokens
	}
	if g.Temperature != nil {
		temp = *g.Temperature
	}
	req["max_tokens"], req["temperature"] = maxTokens, temp
	if g.TopP != nil {
		req["top_p"] = *g.TopP
	}
	if g.Seed != nil {
		req["seed"] = *g.Seed
	}
	for k, v := range map[string]json.RawMessage{"stop": g.Stop, "response_format": g.ResponseFormat, "tools": g.Tools, "tool_choice": g.ToolChoice} {
		if len(v) > 0 {
			req[k] = v
		}
	}
	if ex.tools != nil {
		req["tools"] = ex.tools
	}
	body, _ := json.Marshal(req)
	pasStart := s.now()
	resp, genErr := s.Chat.Complete(ctx, j.Entity, body)
	latency := s.now().Sub(pasStart).Seconds()
	if genErr != nil && !fault.Is(genErr, fault.KindInvalid) {
		return rowResult{}, fmt.Errorf("row %d: %v", ex.index, genErr)
	}
	var out reply
	var usage map[string]any
	var respModel string
	if genErr == nil {
		var r struct {
			Model   string `json:"model"`
			Choices []struct {
				Message reply `json:"message"`
			} `json:"choices"`
			Usage map[string]any `json:"usage"`
		}
		if err := json.Unmarshal(resp, &r); err != nil || len(r.Choices) == 0 {
			return rowResult{}, fmt.Errorf("row %d: the chat API's answer is not a completion: %s", ex.index, resp)
		}
		out, usage, respModel = r.Choices[0].Message, r.Usage, r.Model
	}
	predEnd := s.now()

	// Score.
	res := rowResult{Scores: map[string]any{}, Latency: latency}
	type scored struct {
		name    string
		inputs  json.RawMessage
		output  any
		started time.Time
		ended   time.Time
		err     string
	}
	var calls []scored
	for _, sc := range scorers {
		st := s.now()
		expected, _ := ex.expected(&sc.Scorer)
		in, _ := json.Marshal(map[string]any{"output": outputValue(out), "expected": expected})
		var v any
		var serr string
		switch {
		case genErr != nil:
			v = false
			if sc.Type == Judge {
				v = minChoice(sc.Choices)
			}
		case sc.Type == Judge:
			score, err := s.judge(ctx, j, sc, judges[sc.Name], ex, out, expected)
			if err != nil && !fault.Is(err, fault.KindInvalid) {
				return rowResult{}, fmt.Errorf("row %d: the judge of scorer %s: %w", ex.index, sc.Name, err)
			}
			if err != nil {
				serr = err.Error()
			} else {
				v = score
			}
		default:
			sv, err := sc.score(out, expected)
			if err != nil {
				serr = err.Error()
			} else {
				v = sv
			}
		}
		res.Scores[sc.Name] = v
		calls = append(calls, scored{sc.Name, in, v, st, s.now(), serr})
	}

	// Record: predict_and_score, its predict call and the scorer calls, in one batch.
	pasID, predID := newID(), newID()
	var batch []trace.CallBatchItem
	pasIn, _ := json.Marshal(map[string]string{"self": je.EvaluationRef, "model": modelRef, "example": ex.ref})
	exception := ""
	if genErr != nil {
		exception = exceptionJSON(genErr)
	}
	pasOut := map[string]any{"output": outputValue(out), "scores": res.Scores, "model_latency": latency}
	a, b := callPair(project, pasID, traceID, parentID, ops[opPredScore], "", pasStart, s.now(), attrs, pasIn, pasOut, nil, exception)
	batch = append(batch, a, b)
	predIn, _ := json.Marshal(map[string]any{"self": modelRef, "messages": msgs})
	var predSummary any
	if usage != nil && respModel != "" {
		u := map[string]any{"requests": 1}
		for _, k := range []string{"prompt_tokens", "completion_tokens", "total_tokens"} {
			if v, ok := usage[k]; ok {
				u[k] = v
			}
		}
		predSummary = map[string]any{"usage": map[string]any{respModel: u}}
	}
	var predOut any = outputValue(out)
	if genErr != nil {
		predOut = nil
	}
	a, b = callPair(project, predID, traceID, pasID, ops[opPredict], "", pasStart, predEnd, attrs, predIn, predOut, predSummary, exception)
	batch = append(batch, a, b)
	scorerCallIDs := make([]string, len(calls))
	for i, c := range calls {
		scorerCallIDs[i] = newID()
		a, b = callPair(project, scorerCallIDs[i], traceID, pasID, scorerRefs[c.name][1], "", c.started, c.ended, attrs, c.inputs, c.output, nil, c.err)
		batch = append(batch, a, b)
	}
	if _, err := s.Trace.CallUpsertBatch(ctx, trace.CallCreateBatchReq{Batch: batch}, func(string, string) error { return nil }); err != nil {
		return rowResult{}, err
	}
	var fb trace.FeedbackBatchCreateReq
	for i, c := range calls {
		if c.output == nil {
			continue
		}
		payload, _ := json.Marshal(map[string]any{"output": c.output})
		callRef := "weave:///" + project + "/call/" + scorerCallIDs[i]
		runnable := scorerRefs[c.name][0]
		fb.Batch = append(fb.Batch, trace.FeedbackCreateReq{ProjectID: project, WeaveRef: "weave:///" + project + "/call/" + predID,
			FeedbackType: "wandb.runnable." + c.name, Payload: payload, CallRef: &callRef, RunnableRef: &runnable})
	}
	if len(fb.Batch) > 0 {
		if _, err := s.Trace.FeedbackBatchCreate(ctx, fb, j.Entity, func(string, string) error { return nil }); err != nil {
			return rowResult{}, err
		}
	}
	return res, nil
}

// outputValue is a reply as an evaluation's output: its text, or, with tool calls, the
// message {content, tool_calls}.
func outputValue(r reply) any {
	if len(r.ToolCalls) == 0 {
		return r.Content
	}
	return map[string]any{"content": r.Content, "tool_calls": r.ToolCalls}
}

func minChoice(c map[string]float64) float64 {
	first := true
	m := 0.0
	for _, v := range c {
		if first || v < m {
			m, first = v, false
		}
	}
	return m
}

// exceptionJSON is an error as the Python SDK records an exception.
func exceptionJSON(err error) string {
	b, _ := json.Marshal(map[string]string{"type": "HoneChatError", "message": err.Error()})
	return string(b)
}

// judge asks a judge model the scorer's prompt about a reply; its answer is held to the
// scorer's labels (structured outputs' choice) and read as the label's score.
func (s *Service) judge(ctx context.Context, j jobs.Job, sc *scorer, model string, ex *example, out reply, expected json.RawMessage) (float64, error) {
	var msgs []map[string]string
	if sc.System != "" {
		msgs = append(msgs, map[string]string{"role": "system", "content": sc.System})
	}
	msgs = append(msgs, map[string]string{"role": "user", "content": renderPrompt(sc.Prompt, ex, out, expected)})
	maxTokens := 32
	if sc.MaxTokens != nil {
		maxTokens = *sc.MaxTokens
	}
	labels := sc.labels()
	sort.Strings(labels)
	body, _ := json.Marshal(map[string]any{"model": model, "messages": msgs, "max_tokens": maxTokens, "temperature": 0,
		"structured_outputs": map[string]any{"choice": labels}})
	resp, err := s.Chat.Complete(ctx, j.Entity, body)
	if err != nil {
		return 0, err
	}
	var r struct {
		Choices []struct {
			Message reply `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(resp, &r) != nil || len(r.Choices) == 0 {
		return 0, fmt.Errorf("the judge's answer is not a completion: %s", resp)
	}
	v, ok := sc.judgeScore(r.Choices[0].Message.Content)
	if !ok {
		return 0, fault.Invalid("", "the judge answered %q, none of %v", r.Choices[0].Message.Content, labels)
	}
	return v, nil
}
