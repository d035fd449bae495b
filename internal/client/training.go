package client

import (
	"bytes"
	"context"
	"net/url"
	"strconv"

	"github.com/honeai/hone/internal/evaluation"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/trainapi"
	"github.com/honeai/hone/internal/training"
)

const preview = "/v1/preview"

// BaseModels lists the base models the server can fine-tune.
func (c *Client) BaseModels(ctx context.Context) ([]trainapi.BaseModel, error) {
	var l trainapi.List[trainapi.BaseModel]
	err := c.JSON(ctx, "GET", preview+"/base-models", nil, &l)
	return l.Data, err
}

// Model gets a trainable model by reference (<entity>/<project>/<name>, or its id).
func (c *Client) Model(ctx context.Context, ref string) (registry.Model, error) {
	var m registry.Model
	err := c.JSON(ctx, "GET", preview+"/models/"+ref, nil, &m)
	return m, err
}

// Models lists the key's entity's trainable models.
func (c *Client) Models(ctx context.Context) ([]registry.Model, error) {
	var l trainapi.List[registry.Model]
	err := c.JSON(ctx, "GET", preview+"/models", nil, &l)
	return l.Data, err
}

// CreateModel creates a trainable model (or, with ReturnExisting, answers the one there is).
func (c *Client) CreateModel(ctx context.Context, req trainapi.CreateModelRequest) (registry.Model, error) {
	var m registry.Model
	err := c.JSON(ctx, "POST", preview+"/models", req, &m)
	return m, err
}

// DeleteModel deletes a trainable model with its checkpoints.
func (c *Client) DeleteModel(ctx context.Context, ref string) error {
	return c.JSON(ctx, "DELETE", preview+"/models/"+ref, nil, nil)
}

// Checkpoints lists a page of a model's checkpoints: newest first, at most limit (0: the
// server's default), after the checkpoint id after ("" from the start).
func (c *Client) Checkpoints(ctx context.Context, ref string, limit int, after string) (trainapi.Page[registry.Checkpoint], error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if after != "" {
		q.Set("after", after)
	}
	var p trainapi.Page[registry.Checkpoint]
	err := c.JSON(ctx, "GET", preview+"/models/"+ref+"/checkpoints"+query(q), nil, &p)
	return p, err
}

// PruneCheckpoints deletes a model's checkpoints but the latest and the keepBest best by
// metric (higher is better).
func (c *Client) PruneCheckpoints(ctx context.Context, ref, metric string, keepBest int) (trainapi.PruneResult, error) {
	var res trainapi.PruneResult
	err := c.JSON(ctx, "DELETE", preview+"/models/"+ref+"/checkpoints", map[string]any{"best_checkpoint_metric": metric, "keep_best": keepBest}, &res)
	return res, err
}

// UploadFile uploads a training data file (contentType: its type, such as application/jsonl);
// its URL is what training_data_url takes.
func (c *Client) UploadFile(ctx context.Context, data []byte, contentType string) (trainapi.File, error) {
	var f trainapi.File
	err := c.Do(ctx, "POST", preview+"/files", bytes.NewReader(data), contentType, &f)
	return f, err
}

// DatasetFromCalls builds a Weave Dataset of SFT examples or RL trajectory groups from a
// trace project's calls. body is a training.FromCallsRequest, or a map of the fields to send
// (a field left out is not the same as one sent empty: feedback and query).
func (c *Client) DatasetFromCalls(ctx context.Context, body any) (training.FromCallsResult, error) {
	var res training.FromCallsResult
	err := c.JSON(ctx, "POST", preview+"/datasets/from-calls", body, &res)
	return res, err
}

// CreateSFTJob queues an SFT training job and returns its id.
func (c *Client) CreateSFTJob(ctx context.Context, req training.SFTRequest) (string, error) {
	var j trainapi.JobCreated
	err := c.JSON(ctx, "POST", preview+"/sft-training-jobs", req, &j)
	return j.ID, err
}

// CreateRLJob queues an RL training job (one step) and returns its id.
func (c *Client) CreateRLJob(ctx context.Context, req training.RLRequest) (string, error) {
	var j trainapi.JobCreated
	err := c.JSON(ctx, "POST", preview+"/training-jobs", req, &j)
	return j.ID, err
}

// Job gets a training job.
func (c *Client) Job(ctx context.Context, id string) (jobs.Job, error) {
	var j jobs.Job
	err := c.JSON(ctx, "GET", preview+"/training-jobs/"+id, nil, &j)
	return j, err
}

// JobFilter selects the training jobs ListJobs lists: of a model (reference or id), in a
// status, created before a job id; at most Limit (0: the server's default, 20).
type JobFilter struct {
	Model, Status, Before string
	Limit                 int
}

// ListJobs lists a page of the entity's training jobs, newest first.
func (c *Client) ListJobs(ctx context.Context, f JobFilter) (trainapi.Page[jobs.Job], error) {
	q := url.Values{}
	if f.Limit > 0 {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if f.Model != "" {
		q.Set("model_id", f.Model)
	}
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	if f.Before != "" {
		q.Set("before", f.Before)
	}
	var p trainapi.Page[jobs.Job]
	err := c.JSON(ctx, "GET", preview+"/training-jobs"+query(q), nil, &p)
	return p, err
}

// CancelJob cancels a queued or running training job.
func (c *Client) CancelJob(ctx context.Context, id string) (jobs.Job, error) {
	var j jobs.Job
	err := c.JSON(ctx, "POST", preview+"/training-jobs/"+id+"/cancel", map[string]any{}, &j)
	return j, err
}

// JobEvents lists a page of a training job's events, after the event id after.
func (c *Client) JobEvents(ctx context.Context, id, after string, limit int) (trainapi.Page[jobs.Event], error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if after != "" {
		q.Set("after", after)
	}
	var p trainapi.Page[jobs.Event]
	err := c.JSON(ctx, "GET", preview+"/training-jobs/"+id+"/events"+query(q), nil, &p)
	return p, err
}

// FollowJobEvents follows a training job's events live until it ends; the caller closes the
// stream.
func (c *Client) FollowJobEvents(ctx context.Context, id string) (*Events[jobs.Event], error) {
	return follow[jobs.Event](ctx, c, preview+"/training-jobs/"+id+"/events")
}

// CreateEvaluationJob queues an evaluation job. body is an evaluation.CreateRequest, or a map
// of the fields to send (the server tells a field sent from one left out: an evaluation ref
// takes none of the evaluation's own fields).
func (c *Client) CreateEvaluationJob(ctx context.Context, body any) (evaluation.JobView, error) {
	var v evaluation.JobView
	err := c.JSON(ctx, "POST", preview+"/evaluation-jobs", body, &v)
	return v, err
}

// EvaluationJob gets an evaluation job with its runs' summaries.
func (c *Client) EvaluationJob(ctx context.Context, id string) (evaluation.JobView, error) {
	var v evaluation.JobView
	err := c.JSON(ctx, "GET", preview+"/evaluation-jobs/"+id, nil, &v)
	return v, err
}

// FollowEvaluationEvents follows an evaluation job's events live until it ends; the caller
// closes the stream.
func (c *Client) FollowEvaluationEvents(ctx context.Context, id string) (*Events[jobs.Event], error) {
	return follow[jobs.Event](ctx, c, preview+"/evaluation-jobs/"+id+"/events")
}

// query is q as a URL's query ("" when empty).
func query(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}
