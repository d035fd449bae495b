package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"sync"

	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/chatapi"
	"github.com/honeai/hone/internal/evaluation"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/loop"
	"github.com/honeai/hone/internal/serving"
)

// The improvement loop's wiring: evaluations (internal/evaluation) on the job queue, their
// generation through the chat API in this process.

// openEvaluation builds the evaluation service on the system's store, registry, models,
// training and trace services, and lets training jobs name evaluations.
func (s *system) openEvaluation(ctx context.Context) error {
	ev, err := evaluation.Open(ctx, s.db)
	if err != nil {
		return err
	}
	ev.Reg, ev.Models, ev.Training, ev.Trace, ev.Queue, ev.Log = s.reg, s.models, s.training, s.trace, s.queue, s.log
	ev.Chat = &inprocChat{sys: s}
	ev.Aliases = s.reg
	s.evals = ev
	s.training.Evaluations = ev
	lp, err := loop.Open(ctx, s.db)
	if err != nil {
		return err
	}
	lp.Reg, lp.Evals, lp.Training, lp.Trace, lp.Queue, lp.Log = s.reg, ev, s.training, s.trace, s.queue, s.log
	s.loop = lp
	ev.Promoter = lp
	return nil
}

// jobRunner runs the queue's jobs: evaluation jobs, training jobs (with the evaluation they
// name), wrapped for metrics and spans.
func (s *system) jobRunner() jobs.Runner {
	return s.tel.Jobs(s.metrics.Jobs.Wrap(s.loop.Runner(s.evals.Runner(s.training.Run))))
}

// watchPolicies checks the training policies every --policy-check until ctx ends (each node
// does; a lease on a policy's row lets one node at a time start its run).
func (s *system) watchPolicies(ctx context.Context) {
	s.workers.Add(1)
	go func() {
		defer s.workers.Done()
		s.loop.Watch(ctx, s.cfg.Train.PolicyCheck)
	}()
}

// inprocChat is evaluation.Chat over the chat API's handler in this process: a request
// runs exactly as POST /v1/chat/completions (templates, tools, structured outputs,
// checkpoints and aliases), as the job's entity, without a network hop. In `hone worker`,
// whose models have no inference engines, the models get engines of their own on first use.
type inprocChat struct {
	sys  *system
	once sync.Once
	h    http.Handler
}

func (c *inprocChat) handler() http.Handler {
	c.once.Do(func() {
		s := c.sys
		models := s.models
		if s.cfg.WorkerOnly {
			models = s.engineModels()
		}
		api := &chatapi.API{Models: models, Adapters: s.training, MaxLogprobs: s.cfg.Chat.MaxLogprobs, Logger: s.log,
			PriorityEnabled: s.cfg.Chat.Policy == inference.PolicyPriority}
		r := httpx.NewRouter()
		// The principal is the job's, put in the request's context by Complete.
		api.Register(r, func(next http.Handler) http.Handler { return next })
		c.h = r
	})
	return c.h
}

// Complete runs one chat completion request as entity.
func (c *inprocChat) Complete(ctx context.Context, entity string, body []byte) ([]byte, error) {
	ctx = auth.WithPrincipal(ctx, auth.Principal{Entity: entity, KeyID: "evaluation/" + entity})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	w := &bufferWriter{header: http.Header{}, status: http.StatusOK}
	c.handler().ServeHTTP(w, req)
	if w.status == http.StatusOK {
		return w.body.Bytes(), nil
	}
	var env struct {
		Error struct {
			Message string  `json:"message"`
			Param   *string `json:"param"`
		} `json:"error"`
	}
	json.Unmarshal(w.body.Bytes(), &env)
	param := ""
	if env.Error.Param != nil {
		param = *env.Error.Param
	}
	msg := env.Error.Message
	if msg == "" {
		msg = http.StatusText(w.status)
	}
	switch {
	case w.status == http.StatusNotFound:
		return nil, fault.NotFound(param, "%s", msg)
	case w.status == http.StatusTooManyRequests || w.status >= 500:
		return nil, fault.Unavailable("the chat API answered %d: %s", w.status, msg)
	case w.status >= 400:
		return nil, fault.Invalid(param, "%s", msg)
	}
	return nil, fault.Unavailable("the chat API answered %d: %s", w.status, msg)
}

// bufferWriter is an http.ResponseWriter that keeps the answer in memory.
type bufferWriter struct {
	header http.Header
	status int
	wrote  bool
	body   bytes.Buffer
}

func (w *bufferWriter) Header() http.Header { return w.header }
func (w *bufferWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
}
func (w *bufferWriter) Write(b []byte) (int, error) {
	w.wrote = true
	return w.body.Write(b)
}

// engineModels gives `hone worker`'s models (loaded for training, without engines) engines of
// their own, sharing the weights, for evaluations; they are closed with the system.
func (s *system) engineModels() *serving.Models {
	out := serving.NewModels()
	for _, m := range s.models.List() {
		e := m.WithEngine(s.baseOpts.Engine)
		s.evalEngines = append(s.evalEngines, e)
		out.Add(e)
	}
	return out
}

// closeEvaluation stops the engines evaluations started in `hone worker`.
func (s *system) closeEvaluation() {
	for _, e := range s.evalEngines {
		if e.Engine != nil {
			e.Engine.Close()
		}
	}
}
