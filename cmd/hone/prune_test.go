package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestModelsPruneAndSkippedGroups: four RL steps (each with one group whose rewards differ and
// one whose rewards are all equal, which the job reports as a group_skipped event), val/reward
// logged on each checkpoint; `hone models prune` keeps the best by val/reward and the latest
// and deletes the others with their files; bad prune requests name their field and delete
// nothing.
func TestModelsPruneAndSkippedGroups(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	key := initialKey(t, dir)
	bearer := "Bearer " + key
	u := s.url + "/v1/preview"
	code, _, body := do(t, "POST", u+"/models", bearer, `{"project":"p","name":"pruned","base_model":"demo"}`)
	id := jsonOf(t, code, body, 200)["id"].(string)
	traj := func(content string, reward float64) string {
		return fmt.Sprintf(`{"messages_and_choices":[{"role":"user","content":"Capital of France?"},{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":%q}}],"reward":%g}`, content, reward)
	}
	groups := `[{"trajectories":[` + traj("Paris.", 1) + `,` + traj("Rome.", 0) + `]},{"trajectories":[` + traj("Lyon.", 0.5) + `,` + traj("Nice.", 0.5) + `]}]`
	for i, valReward := range []float64{0.2, 0.9, 0.5, 0.1} {
		code, _, body := do(t, "POST", u+"/training-jobs", bearer, `{"model_id":"`+id+`","trajectory_groups":`+groups+`,"experimental_config":{"allow_training_without_logprobs":true,"learning_rate":1e-3}}`)
		jobID := jsonOf(t, code, body, 200)["id"].(string)
		if j := waitJob(t, s, bearer, jobID); j["status"] != "SUCCEEDED" || j["step"] != float64(i+1) {
			t.Fatalf("RL job %d: %v", i, j)
		}
		if i == 0 {
			code, _, body := do(t, "GET", u+"/training-jobs/"+jobID+"/events", bearer, "")
			evs := jsonOf(t, code, body, 200)["data"].([]any)
			var skipped []map[string]any
			for _, e := range evs {
				if e := e.(map[string]any); e["type"] == "group_skipped" {
					skipped = append(skipped, e["data"].(map[string]any))
				}
			}
			if len(skipped) != 1 || skipped[0]["group_index"] != float64(1) || skipped[0]["num_trajectories"] != float64(2) || skipped[0]["reward"] != 0.5 ||
				!strings.Contains(skipped[0]["message"].(string), "trajectory group 1 skipped: all 2 trajectories have reward 0.5") {
				t.Fatalf("group_skipped events %v in %s", skipped, body)
			}
		}
		log := fmt.Sprintf(`{"split":"val","trajectory_groups":[{"trajectories":[{"messages_and_choices":[{"role":"user","content":"q"},{"finish_reason":"stop","index":0,"message":{"role":"assistant","content":"a"}}],"reward":%g}]}]}`, valReward)
		code, _, body = do(t, "POST", u+"/models/"+id+"/log", bearer, log)
		jsonOf(t, code, body, 200)
	}
	steps := func() string {
		code, _, body := do(t, "GET", u+"/models/"+id+"/checkpoints?order=asc", bearer, "")
		var out []string
		for _, c := range jsonOf(t, code, body, 200)["data"].([]any) {
			out = append(out, fmt.Sprint(c.(map[string]any)["step"]))
		}
		return strings.Join(out, ",")
	}

	// Bad requests delete nothing.
	for _, c := range []struct{ body, param string }{
		{`{"best_checkpoint_metric":"val/nope"}`, "best_checkpoint_metric"},
		{`{"keep_best":0}`, "keep_best"},
		{`{"steps":[1],"keep_best":1}`, "steps"},
	} {
		code, _, body := do(t, "DELETE", u+"/models/"+id+"/checkpoints", bearer, c.body)
		e := envelope(t, body)
		if code != 400 || e.Param == nil || *e.Param != c.param {
			t.Errorf("%s: %d %s", c.body, code, body)
		}
	}
	if got := steps(); got != "1,2,3,4" {
		t.Fatalf("after bad requests: steps %s", got)
	}

	var out, errb bytes.Buffer
	if code := runModels([]string{"prune", "--url", s.url, "--data", dir, "--model", "local/p/pruned"}, &out, &errb); code != 0 {
		t.Fatalf("prune: exit %d %s %s", code, out.String(), errb.String())
	}
	if !strings.Contains(out.String(), "deleted 2 checkpoint(s) of local/p/pruned: steps 1, 3") || !strings.Contains(out.String(), "best by val/reward: 2; latest: 4") {
		t.Fatalf("prune printed %q", out.String())
	}
	if got := steps(); got != "2,4" {
		t.Fatalf("after prune: steps %s", got)
	}
	for step, want := range map[int]bool{1: false, 2: true, 3: false, 4: true} {
		_, err := os.Stat(filepath.Join(dir, "checkpoints", id, fmt.Sprintf("step%d", step)))
		if (err == nil) != want {
			t.Errorf("step %d files exist=%v, want %v", step, err == nil, want)
		}
	}
	code, _, body = do(t, "POST", s.url+"/v1/chat/completions", bearer, `{"model":"local/p/pruned:step2","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)
	jsonOf(t, code, body, 200)

	// Over the API with the metric named: keep_best 2 of the two left keeps both.
	code, _, body = do(t, "DELETE", u+"/models/"+id+"/checkpoints", bearer, `{"best_checkpoint_metric":"val/reward","keep_best":2}`)
	if r := jsonOf(t, code, body, 200); r["deleted_count"] != float64(0) || fmt.Sprint(r["kept_steps"]) != "[2 4]" {
		t.Fatalf("keep_best 2: %s", body)
	}
}
