package wandbapi

import (
	"encoding/json"
	"errors"
	"slices"

	"github.com/honeai/hone/internal/wandb"
)

// The run fields: a run found by name through its project, upsertBucket (start or update a
// run), createRunFiles and markRunFilesUploaded (the files a run uploads).

func runByName(c *gqlCtx, entity, project, name string) (*gqlRun, error) {
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	r, err := ws.Run(c.ctx, entity, project, name)
	if errors.Is(err, wandb.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	o := runObj(c, r)
	return &o, nil
}

func runObj(c *gqlCtx, r wandb.Run) gqlRun {
	tail := "[]"
	if r.HistoryLines > 0 {
		if lines, err := c.wb.History(c.ctx, r.Entity, r.Project, r.Name); err == nil && len(lines) > 0 {
			b, _ := json.Marshal(lines[len(lines)-1:])
			tail = string(b)
		}
	}
	return gqlRun{ID: r.ID, Name: r.Name, DisplayName: r.DisplayName, Config: r.Config, SummaryMetrics: r.Summary,
		State: r.State, JobType: r.JobType, HistoryLineCount: r.HistoryLines, HistoryTail: tail, EventsTail: "[]",
		CreatedAt: wandb.FormatTime(r.CreatedAt), HeartbeatAt: wandb.FormatTime(r.CreatedAt),
		Project:     projectInfo(c, r.Entity, r.Project),
		WandbConfig: field(func(args keysArgs) (string, error) { return wandbConfig(r.Config, args.Keys), nil }),
		History: lazy(func() ([]string, error) { // every line, as JSON strings
			lines, err := c.wb.History(c.ctx, r.Entity, r.Project, r.Name)
			if lines == nil {
				lines = []string{}
			}
			return lines, err
		})}
}

// wandbConfig is the SDK's own part of a run's config (`_wandb`), limited to keys when given,
// as a JSON string. The SDK resumes a run only when it holds "t" (the run has started).
func wandbConfig(config string, keys []string) string {
	var c struct {
		W struct {
			Value map[string]json.RawMessage `json:"value"`
		} `json:"_wandb"`
	}
	_ = json.Unmarshal([]byte(config), &c)
	out := map[string]json.RawMessage{}
	for k, v := range c.W.Value {
		if len(keys) == 0 || slices.Contains(keys, k) {
			out[k] = v
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func rootUpsertBucket(c *gqlCtx, args inputArgs[upsertBucketInput]) (*gqlUpsertBucketPayload, error) {
	in := args.Input
	entity, err := c.own(in.EntityName)
	if err != nil {
		return nil, err
	}
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	run, inserted, err := ws.UpsertRun(c.ctx, entity, in.ModelName, in.Name, wandb.RunInput{
		DisplayName: in.DisplayName, JobType: in.JobType, Config: in.Config, Summary: in.SummaryMetrics, State: in.State})
	if err != nil {
		return nil, err
	}
	return &gqlUpsertBucketPayload{Bucket: runObj(c, run), Inserted: inserted}, nil
}

func rootCreateRunFiles(c *gqlCtx, args inputArgs[createRunFilesInput]) (*gqlCreateRunFilesPayload, error) {
	in := args.Input
	entity, err := c.own(in.EntityName)
	if err != nil {
		return nil, err
	}
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	project, run := in.ProjectName, in.RunName
	r, err := ws.Run(c.ctx, entity, project, run)
	if err != nil {
		return nil, gqlErrorf("run %s/%s/%s not found", entity, project, run)
	}
	ups := make([]wandb.Upload, len(in.Files))
	for i, name := range in.Files {
		ups[i] = wandb.Upload{Entity: entity, Kind: wandb.UploadRunFile, Project: project, Run: run, Name: name}
	}
	tokens, err := ws.NewUploads(c.ctx, ups) // one statement per batch, not one per file
	if err != nil {
		return nil, err
	}
	files := make([]gqlRunFileUpload, len(in.Files))
	for i, name := range in.Files {
		files[i] = gqlRunFileUpload{Name: name, UploadURL: c.uploadURL(tokens[i])}
	}
	return &gqlCreateRunFilesPayload{RunID: r.ID, Files: files}, nil
}

func rootMarkRunFilesUploaded(c *gqlCtx, args inputArgs[entityInput]) (*gqlSuccessPayload, error) {
	if _, err := c.own(args.Input.EntityName); err != nil {
		return nil, err
	}
	return &gqlSuccessPayload{Success: true}, nil
}
