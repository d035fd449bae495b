package training

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/synth"
)

// newService is a training service on a real SQLite store serving one tiny random model
// ("tiny", loaded for training only).
func newService(t *testing.T) *Service {
	t.Helper()
	ctx := context.Background()
	d := dbtest.SQLite(t)
	dir := t.TempDir()
	reg, err := registry.New(ctx, d, filepath.Join(dir, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobs.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	mdir := filepath.Join(dir, "tiny")
	if err := synth.Write(mdir, synth.Tiny("llama")); err != nil {
		t.Fatal(err)
	}
	base, err := serving.Load("tiny", mdir, serving.LoadOptions{NoEngine: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(base.Close)
	if base.Engine != nil {
		t.Fatal("NoEngine loaded an engine")
	}
	models := serving.NewModels()
	models.Add(base)
	return &Service{Reg: reg, Queue: q, Models: models, FilesDir: filepath.Join(dir, "files"), DataRoot: t.TempDir()}
}

const sftLines = `{"messages":[{"role":"user","content":"Capital of France?"},{"role":"assistant","content":"Paris."}]}
{"messages":[{"role":"user","content":"Capital of Peru?"},{"role":"assistant","content":"Lima."}]}
`

func faultOf(t *testing.T, err error, kind fault.Kind, field string) {
	t.Helper()
	f, ok := fault.As(err)
	if !ok || f.Kind != kind || f.Field != field {
		t.Fatalf("want a fault of kind %d on %q, got %#v (%v)", kind, field, f, err)
	}
}

// TestModelsAndFaults: models on served bases only, names checked, another entity's model
// not found, duplicates a conflict unless return_existing.
func TestModelsAndFaults(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	_, err := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "nope"})
	faultOf(t, err, fault.KindInvalid, "base_model")
	_, err = s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "a/b", BaseModel: "tiny"})
	faultOf(t, err, fault.KindInvalid, "name")
	m, err := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	faultOf(t, err, fault.KindConflict, "name")
	again, err := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny", ReturnExisting: true})
	if err != nil || again.ID != m.ID {
		t.Fatalf("return_existing: %+v %v", again, err)
	}
	for _, ref := range []string{m.ID, "e/p/m"} {
		if got, err := s.Model(ctx, "e", ref); err != nil || got.ID != m.ID {
			t.Fatalf("Model(%s): %+v %v", ref, got, err)
		}
	}
	_, err = s.Model(ctx, "other", m.ID)
	faultOf(t, err, fault.KindNotFound, "model_id")
}

// TestSpecsAreQueued: a job's payload is its validated spec; a spec read back trains the same
// groups and configuration; a job queued by an older Hone (the raw request) still reads.
func TestSpecsAreQueued(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	m, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	groups := []json.RawMessage{json.RawMessage(`{"trajectories":[
		{"messages_and_choices":[{"role":"user","content":"hi"},{"role":"assistant","content":"a"}],"reward":1},
		{"exchanges":{"chat_completions":[{"request":{"messages":[{"role":"user","content":"hi"}]},"response":{"choices":[{"index":0,"message":{"role":"assistant","content":"b"},"finish_reason":"stop"}]}}]}}]}`)}
	req := RLRequest{ModelID: m.ID, TrajectoryGroups: groups, ExperimentalConfig: json.RawMessage(`{"learning_rate":1e-3,"loss_fn":"ppo","kl_penalty_coef":0.1,"kl_penalty_step_lag":2,"allow_training_without_logprobs":true}`)}
	j, err := s.CreateRLJob(ctx, m, req)
	if err != nil {
		t.Fatal(err)
	}
	var payload map[string]json.RawMessage
	json.Unmarshal(j.Payload, &payload)
	if string(payload["spec_version"]) != "1" || payload["rl"] == nil {
		t.Fatalf("payload is not a spec: %s", j.Payload)
	}
	q, err := decodeQueued(j)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := NewRLSpec(req)
	if q.RL.Config.LearningRate != 1e-3 || q.RL.Config.Loss != "ppo" || *q.RL.KLStepLag != 2 || len(q.RL.Groups[0].Trajectories) != 2 ||
		q.RL.Groups[0].Trajectories[1].Reward != 0 || len(q.RL.Groups[0].Trajectories[1].MessagesAndChoices) != 2 {
		t.Fatalf("spec read back: %+v", q.RL)
	}
	a, _ := json.Marshal(want)
	b, _ := json.Marshal(q.RL)
	if string(a) != string(b) {
		t.Fatalf("spec changed in the queue:\n%s\n%s", a, b)
	}
	// A job as an older Hone queued it: the request itself.
	legacy, _ := json.Marshal(req)
	q, err = decodeQueued(jobs.Job{Kind: "rl", Payload: legacy})
	if err != nil || q.RL == nil || q.RL.Config.Loss != "ppo" {
		t.Fatalf("legacy payload: %+v %v", q, err)
	}
	if _, err := decodeQueued(jobs.Job{Kind: "sft", Payload: j.Payload}); err == nil {
		t.Fatal("an rl spec read as an sft job")
	}

	// Bad requests are faults naming the field, and queue nothing.
	for _, c := range []struct {
		req   RLRequest
		field string
	}{
		{RLRequest{}, "trajectory_groups"},
		{RLRequest{TrajectoryGroups: groups, ExperimentalConfig: json.RawMessage(`{"learning_rate":"fast"}`)}, "experimental_config.learning_rate"},
		{RLRequest{TrajectoryGroups: groups, ExperimentalConfig: json.RawMessage(`{"warp":1}`)}, "experimental_config"},
		{RLRequest{TrajectoryGroups: []json.RawMessage{json.RawMessage(`{"trajectories":[{"reward":1}]}`)}}, "trajectory_groups[0].trajectories[0].messages_and_choices"},
		{RLRequest{TrajectoryGroups: groups, ExperimentalConfig: json.RawMessage(`{"kl_penalty_coef":0.1,"kl_penalty_reference_step":3}`)}, "experimental_config.kl_penalty_reference_step"},
	} {
		_, err := s.CreateRLJob(ctx, m, c.req)
		faultOf(t, err, fault.KindInvalid, c.field)
	}
	// The trajectories are tokenised when the job is created: a choice whose sampled ids
	// cannot be recovered, or without logprobs, is a fault naming the trajectory and the
	// choice.
	for _, c := range []struct{ choice, msg string }{
		{`{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"b"},"logprobs":{"content":[{"token":"\u0000not a token\u0001","logprob":-1,"bytes":null}]}}`,
			`trajectory_groups[0].trajectories[1]: messages_and_choices[1]: logprobs.content[0]: token "\x00not a token\x01" is not a token of the model`},
		{`{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"b"}}`,
			`trajectory_groups[0].trajectories[1]: messages_and_choices[1]: the choice has no logprobs; sample with logprobs=true or set allow_training_without_logprobs`},
	} {
		bad := []json.RawMessage{json.RawMessage(`{"trajectories":[
			{"messages_and_choices":[{"role":"user","content":"hi"},{"role":"assistant","content":"a"}],"reward":1},
			{"messages_and_choices":[{"role":"user","content":"hi"},` + c.choice + `]}]}`)}
		_, err := s.CreateRLJob(ctx, m, RLRequest{TrajectoryGroups: bad})
		faultOf(t, err, fault.KindInvalid, "trajectory_groups[0].trajectories[1]")
		if f, _ := fault.As(err); f.Msg != c.msg {
			t.Fatalf("message %q\nwant    %q", f.Msg, c.msg)
		}
	}
	list, _, _ := s.ListJobs(ctx, "e", JobFilter{})
	if len(list) != 1 {
		t.Fatalf("bad requests queued jobs: %d", len(list))
	}
}

// TestDataURLs: uploads of the entity, paths under the root only, other schemes refused with
// what to do.
func TestDataURLs(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	m, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	_, err := s.SaveUpload("e", []byte(" \n"))
	faultOf(t, err, fault.KindInvalid, "file")
	up, err := s.SaveUpload("e", []byte(sftLines))
	if err != nil || !strings.HasPrefix(up.URL, "hone-file:///file-") || up.Bytes != len(sftLines) {
		t.Fatalf("upload: %+v %v", up, err)
	}
	if _, err := s.CreateSFTJob(ctx, m, SFTRequest{TrainingDataURL: up.URL, Config: json.RawMessage(`{"epochs":2}`)}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(s.DataRoot, "d.jsonl"), []byte(sftLines), 0o644)
	if _, err := s.CreateSFTJob(ctx, m, SFTRequest{TrainingDataURL: "d.jsonl"}); err != nil {
		t.Fatalf("a path under the root: %v", err)
	}
	other, _ := s.CreateModel(ctx, NewModel{Entity: "o", Project: "p", Name: "m", BaseModel: "tiny"})
	for _, c := range []struct {
		m     registry.Model
		url   string
		kind  fault.Kind
		field string
		says  string
	}{
		{other, up.URL, fault.KindNotFound, "training_data_url", "not found"}, // another entity's upload
		{m, "../etc/passwd", fault.KindInvalid, "training_data_url", "no such file"},
		{m, "/etc/hostname", fault.KindInvalid, "training_data_url", "outside the training data root"},
		{m, s.DataRoot, fault.KindInvalid, "training_data_url", "not a regular file"},
		{m, ".", fault.KindInvalid, "training_data_url", "not a regular file"},
		{m, "wandb-artifact:///e/p/data:v1", fault.KindInvalid, "training_data_url", "W&B artifact"},
		{m, "s3://bucket/x", fault.KindInvalid, "training_data_url", "not supported"},
		{m, "weave:///o/p/object/ds:abc", fault.KindForbidden, "training_data_url", "entity"},
		{m, "weave:///e/p/object/ds:abc", fault.KindInvalid, "training_data_url", "no trace store"},
		{m, "", fault.KindInvalid, "training_data_url", "required"},
		{m, up.URL + "x", fault.KindNotFound, "training_data_url", "not found"},
	} {
		_, err := s.CreateSFTJob(ctx, c.m, SFTRequest{TrainingDataURL: c.url})
		faultOf(t, err, c.kind, c.field)
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v", c.url, err)
		}
	}
	_, err = s.CreateSFTJob(ctx, m, SFTRequest{TrainingDataURL: up.URL, Config: json.RawMessage(`{"epochs":0}`)})
	faultOf(t, err, fault.KindInvalid, "config.epochs")
}

// TestRunAndResolve: a job runs to a checkpoint that chat resolves by every name form; the
// adapter cache follows deletions by model id; another entity resolves nothing.
func TestRunAndResolve(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	m, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	up, _ := s.SaveUpload("e", []byte(sftLines))
	ad, ok, err := s.ResolveAdapter(ctx, "e", "e/p/m")
	if err != nil || !ok || ad.LoRA != nil || ad.Base != "tiny" || ad.Name != "e/p/m:step0" {
		t.Fatalf("before training: %+v %v %v", ad, ok, err)
	}
	for step := 1; step <= 2; step++ {
		j, err := s.CreateSFTJob(ctx, m, SFTRequest{TrainingDataURL: up.URL, Config: json.RawMessage(`{"learning_rate":0.01}`)})
		if err != nil {
			t.Fatal(err)
		}
		var events []string
		got, err := s.Run(ctx, j, func(typ string, _ any) { events = append(events, typ) })
		if err != nil || got == nil || *got != step {
			t.Fatalf("run %d: %v %v", step, got, err)
		}
		if events[0] != jobs.EventStarted || events[len(events)-1] != jobs.EventStep {
			t.Fatalf("events %v", events)
		}
	}
	for name, want := range map[string]string{"e/p/m": "e/p/m:step2", "e/p/m:latest": "e/p/m:step2", "e/p/m:step1": "e/p/m:step1",
		"wandb-artifact:///e/p/m:step2": "e/p/m:step2"} {
		ad, ok, err := s.ResolveAdapter(ctx, "e", name)
		if err != nil || !ok || ad.LoRA == nil || ad.Name != want {
			t.Fatalf("%s: %+v %v %v", name, ad, ok, err)
		}
	}
	if _, ok, _ := s.ResolveAdapter(ctx, "o", "e/p/m:step1"); ok {
		t.Fatal("another entity resolved the checkpoint")
	}
	if _, ok, _ := s.ResolveAdapter(ctx, "e", "e/p/m:step9"); ok {
		t.Fatal("a missing step resolved")
	}
	a1, _, _ := s.ResolveAdapter(ctx, "e", "e/p/m:step1")
	if b1, _, _ := s.ResolveAdapter(ctx, "e", "e/p/m:step1"); b1.LoRA != a1.LoRA {
		t.Fatal("the adapter was not cached")
	}
	if _, _, err := s.DeleteCheckpoints(ctx, m, []int{1}); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := s.ResolveAdapter(ctx, "e", "e/p/m:step1"); ok {
		t.Fatal("a deleted checkpoint still resolves")
	}
	if _, ok := s.adapters[m.ID][1]; ok {
		t.Fatal("the deleted checkpoint stayed cached")
	}
	if _, err := s.DeleteModel(ctx, m); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.adapters[m.ID]; ok {
		t.Fatal("the deleted model's adapters stayed cached")
	}
	list, err := s.ListAdapters(ctx, "e")
	if err != nil || len(list) != 0 {
		t.Fatalf("after delete: %v %v", list, err)
	}
}

// TestLogTrajectories: metrics' means land on the latest checkpoint; a missing split is a
// fault.
func TestLogTrajectories(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	m, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	g := []json.RawMessage{json.RawMessage(`{"trajectories":[{"messages_and_choices":[{"role":"user","content":"x"}],"reward":1,"metrics":{"ok":true}},{"messages_and_choices":[{"role":"user","content":"x"}],"metrics":{"ok":false}}]}`)}
	faultOf(t, s.LogTrajectories(ctx, m, "", g), fault.KindInvalid, "split")
	if _, err := s.Reg.AddCheckpoint(ctx, m.ID, 1, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.LogTrajectories(ctx, m, "val", g); err != nil {
		t.Fatal(err)
	}
	c, _ := s.Reg.Latest(ctx, m.ID)
	if fmt.Sprint(c.Metrics) != "map[val/ok:0.5 val/reward:0.5]" {
		t.Fatalf("metrics %v", c.Metrics)
	}
}

// fakeArtifacts resolves the artifacts it holds (entity/project/name:version → path).
type fakeArtifacts map[string]string

func (f fakeArtifacts) ResolveFile(_ context.Context, entity, project, nameVersion, file string) (string, error) {
	if p, ok := f[entity+"/"+project+"/"+nameVersion]; ok && file == ArtifactDataFile {
		return p, nil
	}
	return "", fault.NotFound("", "artifact %s/%s/%s not found", entity, project, nameVersion)
}

// TestArtifactDataURL: wandb-artifact:/// URLs resolve to the artifact's train.jsonl; a
// missing one is a 404 naming it, another entity's a 403, a malformed URL a 400.
func TestArtifactDataURL(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "train.jsonl")
	os.WriteFile(path, []byte(sftLines), 0o644)
	s.Artifacts = fakeArtifacts{"e/p/data:v0": path}
	m, _ := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"})
	if _, err := s.CreateSFTJob(ctx, m, SFTRequest{TrainingDataURL: "wandb-artifact:///e/p/data:v0"}); err != nil {
		t.Fatal(err)
	}
	if b, err := s.readData(ctx, "e", "wandb-artifact:///e/p/data:v0"); err != nil || string(b) != sftLines {
		t.Fatalf("read: %q %v", b, err)
	}
	for _, c := range []struct {
		url  string
		kind fault.Kind
		says string
	}{
		{"wandb-artifact:///e/p/data:v3", fault.KindNotFound, "e/p/data:v3 not found"},
		{"wandb-artifact:///o/p/data:v0", fault.KindForbidden, "entity"},
		{"wandb-artifact:///e/data", fault.KindInvalid, "is not a wandb-artifact"},
		{"wandb-artifact:///e/p/:v0", fault.KindInvalid, "is not a wandb-artifact"},
	} {
		_, err := s.CreateSFTJob(ctx, m, SFTRequest{TrainingDataURL: c.url})
		faultOf(t, err, c.kind, "training_data_url")
		if !strings.Contains(err.Error(), c.says) {
			t.Errorf("%s: %v", c.url, err)
		}
	}
}
