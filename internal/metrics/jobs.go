package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/honeai/hone/internal/jobs"
)

// Jobs is the training job queue: jobs waiting and running by kind (read from the store when
// scraped), and, for the jobs this process runs, their durations and outcomes, re-runs,
// and training tokens.
type Jobs struct {
	mu    sync.Mutex
	queue *jobs.Queue

	duration  *prometheus.HistogramVec
	runs      *prometheus.CounterVec
	retries   *prometheus.CounterVec
	tokens    *prometheus.CounterVec
	tokensSec *prometheus.GaugeVec
	steps     *prometheus.CounterVec
}

var descJobs = prometheus.NewDesc("hone:jobs", "Training jobs waiting (QUEUED) and running (RUNNING) in the store, by kind (every node of a shared store sees the same).", []string{"kind", "status"}, nil)

func newJobs(reg prometheus.Registerer) *Jobs {
	j := &Jobs{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hone:job_duration_seconds",
			Help:    "How long a run of a job took in this process, by kind and outcome (succeeded, failed, cancelled, released).",
			Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 28800, 86400}}, []string{"kind", "outcome"}),
		runs:      prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hone:job_runs_total", Help: "Runs of jobs this process started, by kind."}, []string{"kind"}),
		retries:   prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hone:job_retries_total", Help: "Runs of jobs that had run before (a dead worker's, or one handed back), by kind."}, []string{"kind"}),
		tokens:    prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hone:training_tokens_total", Help: "Tokens trained on (each optimizer step's), by kind."}, []string{"kind"}),
		tokensSec: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "hone:training_tokens_per_second", Help: "Training throughput of the last optimizer step, by kind."}, []string{"kind"}),
		steps:     prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hone:training_steps_total", Help: "Optimizer steps run, by kind."}, []string{"kind"}),
	}
	reg.MustRegister(j.duration, j.runs, j.retries, j.tokens, j.tokensSec, j.steps, jobsCollector{j})
	// The usual kinds' series exist from the start (at 0), so that rules on them have series
	// to read before the first job runs.
	for _, kind := range []string{"sft", "rl"} {
		j.runs.WithLabelValues(kind)
		j.retries.WithLabelValues(kind)
		j.tokens.WithLabelValues(kind)
		j.steps.WithLabelValues(kind)
		for _, outcome := range []string{"succeeded", "failed", "cancelled", "released"} {
			j.duration.WithLabelValues(kind, outcome)
		}
	}
	return j
}

// SetQueue gives the queue whose counts are read at each scrape.
func (j *Jobs) SetQueue(q *jobs.Queue) {
	j.mu.Lock()
	j.queue = q
	j.mu.Unlock()
}

// Wrap observes run: each job's run, its duration and outcome, and the tokens of its step
// events.
func (j *Jobs) Wrap(run jobs.Runner) jobs.Runner {
	return func(ctx context.Context, job jobs.Job, progress func(typ string, data any)) (*int, error) {
		j.runs.WithLabelValues(job.Kind).Inc()
		if job.Attempt > 1 {
			j.retries.WithLabelValues(job.Kind).Inc()
		}
		start := time.Now()
		step, err := run(ctx, job, func(typ string, data any) {
			if typ == jobs.EventStep {
				j.step(job.Kind, data)
			}
			progress(typ, data)
		})
		outcome := "succeeded"
		switch {
		case err == nil:
		case errors.Is(err, jobs.ErrCancelled):
			outcome = "cancelled"
		case ctx.Err() != nil:
			outcome = "released" // stopped: the job goes back to the queue
		default:
			outcome = "failed"
		}
		j.duration.WithLabelValues(job.Kind, outcome).Observe(time.Since(start).Seconds())
		return step, err
	}
}

// step reads a step event's token counts (SFT's num_tokens, RL's num_trainable_tokens) and
// throughput.
func (j *Jobs) step(kind string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		return
	}
	var m struct {
		NumTokens          *float64 `json:"num_tokens"`
		NumTrainableTokens *float64 `json:"num_trainable_tokens"`
		TokensPerSecond    *float64 `json:"tokens_per_second"`
	}
	if json.Unmarshal(b, &m) != nil {
		return
	}
	j.steps.WithLabelValues(kind).Inc()
	switch {
	case m.NumTokens != nil && *m.NumTokens >= 0:
		j.tokens.WithLabelValues(kind).Add(*m.NumTokens)
	case m.NumTrainableTokens != nil && *m.NumTrainableTokens >= 0:
		j.tokens.WithLabelValues(kind).Add(*m.NumTrainableTokens)
	}
	if m.TokensPerSecond != nil && *m.TokensPerSecond >= 0 {
		j.tokensSec.WithLabelValues(kind).Set(*m.TokensPerSecond)
	}
}

type jobsCollector struct{ j *Jobs }

func (c jobsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descJobs }

func (c jobsCollector) Collect(ch chan<- prometheus.Metric) {
	c.j.mu.Lock()
	q := c.j.queue
	c.j.mu.Unlock()
	if q == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	counts, err := q.Counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(descJobs, err)
		return
	}
	seen := map[[2]string]bool{}
	for _, n := range counts {
		seen[[2]string{n.Kind, n.Status}] = true
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(n.N), n.Kind, n.Status)
	}
	// The usual kinds appear at 0 too, so that a rule on them has a series to read.
	for _, kind := range []string{"sft", "rl"} {
		for _, st := range []string{jobs.Queued, jobs.Running} {
			if !seen[[2]string{kind, st}] {
				ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, 0, kind, st)
			}
		}
	}
}
