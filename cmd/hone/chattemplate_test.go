package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/synth"
)

// bareFamily is a tokenizer with no chat markers: no built-in template fits it.
var bareFamily = synth.Family{Special: []string{"<|endoftext|>"}, BOS: "<|endoftext|>", EOS: "<|endoftext|>", EndOfTurn: "<|endoftext|>"}

// customTemplate is a --chat-template file's template in the tests: plain-text turns.
const customTemplate = `{% for m in messages %}CUSTOM {{ m.role }}: {{ m.content }}<|endoftext|>{% endfor %}{% if add_generation_prompt %}CUSTOM assistant: {% endif %}`

// renderPrompt is the text of a chat request's prompt as the server renders it.
func renderPrompt(t *testing.T, s *server, bearer, model string) string {
	t.Helper()
	code, _, b := do(t, "POST", s.url+"/v1/chat/completions/render", bearer, `{"model":"`+model+`","messages":[{"role":"system","content":"S"},{"role":"user","content":"Hi"}]}`)
	var r struct {
		TokenIDs []int `json:"token_ids"`
	}
	if code != 200 || json.Unmarshal(b, &r) != nil {
		t.Fatalf("render %s: %d %s", model, code, b)
	}
	ids, _ := json.Marshal(r.TokenIDs)
	code, _, b = do(t, "POST", s.url+"/detokenize", bearer, `{"model":"`+model+`","tokens":`+string(ids)+`}`)
	var d struct {
		Prompt string `json:"prompt"`
	}
	if code != 200 || json.Unmarshal(b, &d) != nil {
		t.Fatalf("detokenize %s: %d %s", model, code, b)
	}
	return d.Prompt
}

// TestChatTemplateFlag: a base model whose files have no chat template is served with its
// family's built-in template and stops at its end-of-turn token; --chat-template NAME=FILE
// gives a model the file's template, which chat and training use alike (the model has no
// other: no built-in template fits its vocabulary); /v1/preview/base-models says where each
// template comes from.
func TestChatTemplateFlag(t *testing.T) {
	models := t.TempDir()
	gemma := filepath.Join(models, "gemma")
	o := synth.Tiny("gemma3")
	eot, err := synth.WriteFamily(gemma, o, synth.Families["gemma"])
	if err != nil {
		t.Fatal(err)
	}
	bare := filepath.Join(models, "bare")
	if _, err := synth.WriteFamily(bare, synth.Tiny("llama"), bareFamily); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(models, "custom.jinja")
	if err := os.WriteFile(file, []byte(customTemplate), 0o644); err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	s := startServer(t, data, "--no-demo-model", "--model", "gemma="+gemma, "--model", "bare="+bare, "--chat-template", "bare="+file)
	bearer := "Bearer " + initialKey(t, data)

	code, _, b := do(t, "GET", s.url+"/v1/preview/base-models", bearer, "")
	var list struct {
		Data []struct {
			ID               string `json:"id"`
			ChatTemplateFrom string `json:"chat_template_from"`
		} `json:"data"`
	}
	if code != 200 || json.Unmarshal(b, &list) != nil || len(list.Data) != 2 {
		t.Fatalf("base models: %d %s", code, b)
	}
	from := map[string]string{}
	for _, m := range list.Data {
		from[m.ID] = m.ChatTemplateFrom
	}
	if !strings.HasPrefix(from["gemma"], "built-in gemma") || from["bare"] != "--chat-template "+file {
		t.Fatalf("templates from %q", from)
	}
	if p := renderPrompt(t, s, bearer, "gemma"); p != "<bos><start_of_turn>user\nS\n\nHi<end_of_turn>\n<start_of_turn>model\n" {
		t.Fatalf("gemma prompt %q", p)
	}
	if p := renderPrompt(t, s, bearer, "bare"); p != "CUSTOM system: S<|endoftext|>CUSTOM user: Hi<|endoftext|>CUSTOM assistant: " {
		t.Fatalf("bare prompt %q", p)
	}

	// The end of turn, which the model's files do not name, ends generation.
	code, _, b = do(t, "POST", s.url+"/v1/chat/completions", bearer, fmt.Sprintf(`{"model":"gemma","max_tokens":8,"temperature":0,"logit_bias":{"%d":100},"messages":[{"role":"user","content":"Hi"}]}`, eot))
	var c struct {
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if code != 200 || json.Unmarshal(b, &c) != nil || len(c.Choices) != 1 || c.Choices[0].FinishReason != "stop" || c.Usage.CompletionTokens != 1 {
		t.Fatalf("generating the end of turn: %d %s", code, b)
	}

	// Training renders with the same templates: SFT on each succeeds.
	sft := filepath.Join(t.TempDir(), "data.jsonl")
	if err := os.WriteFile(sft, []byte(sftData), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{"gemma", "bare"} {
		var out, errb bytes.Buffer
		code := runTrain(context.Background(), []string{"sft", "--url", s.url, "--data", data, "--model", "local/tpl/" + base,
			"--base", base, "--file", sft, "--epochs", "1"}, &out, &errb)
		if code != 0 || !strings.Contains(out.String(), "SUCCEEDED") {
			t.Fatalf("sft on %s: exit %d\n%s\n%s", base, code, out.String(), errb.String())
		}
	}
}

// TestChatTemplateFlagRefusals: a model without a chat template for which no built-in one
// fits is refused at start, naming the flag that gives one; so are a --chat-template file
// that is missing or does not compile, and one for a model not served.
func TestChatTemplateFlagRefusals(t *testing.T) {
	models := t.TempDir()
	bare := filepath.Join(models, "bare")
	if _, err := synth.WriteFamily(bare, synth.Tiny("llama"), bareFamily); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(models, "custom.jinja")
	os.WriteFile(file, []byte(customTemplate), 0o644)
	broken := filepath.Join(models, "broken.jinja")
	os.WriteFile(broken, []byte("{% if %}"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--model", "bare=" + bare}, "no chat template: its files have none, and no built-in template fits its architecture \"llama\" and vocabulary; give it one with --chat-template bare=FILE"},
		{[]string{"--model", "bare=" + bare, "--chat-template", filepath.Join(models, "missing.jinja")}, "--chat-template \"" + filepath.Join(models, "missing.jinja") + "\": open"},
		{[]string{"--model", "bare=" + bare, "--chat-template", "bare=" + broken}, "--chat-template \"bare=" + broken + "\": chat template"},
		{[]string{"--model", "bare=" + bare, "--chat-template", "bare=" + file, "--chat-template", "other=" + file}, "--chat-template other=" + file + ": no model \"other\" is served"},
		{[]string{"--model", "bare=" + bare, "--chat-template", file, "--chat-template", file}, "a template for every model is given twice"},
	} {
		var stderr bytes.Buffer
		code := runServe(context.Background(), append([]string{"--addr", "127.0.0.1:0", "--data", t.TempDir(), "--no-demo-model"}, c.args...), io.Discard, &stderr, nil)
		// The log quotes the error: its quotes come escaped.
		if got := strings.ReplaceAll(stderr.String(), `\"`, `"`); code == 0 || !strings.Contains(got, c.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", c.args, code, stderr.String(), c.want)
		}
	}
	// A template given inline (vLLM's flag takes one), for every model.
	data := t.TempDir()
	s := startServer(t, data, "--no-demo-model", "--model", "bare="+bare, "--chat-template", customTemplate)
	if p := renderPrompt(t, s, "Bearer "+initialKey(t, data), "bare"); !strings.HasPrefix(p, "CUSTOM system: S") {
		t.Fatalf("inline template: prompt %q", p)
	}
}

// TestTrainCLIChecksTheBase: `hone train sft` checks the base model before it creates
// anything (a base the server does not serve is refused, and no model is left), and a job the
// server refuses leaves no model that the command created.
func TestTrainCLIChecksTheBase(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	bearer := "Bearer " + initialKey(t, dir)
	file := filepath.Join(t.TempDir(), "data.jsonl")
	os.WriteFile(file, []byte(sftData), 0o644)
	var out, errb bytes.Buffer
	code := runTrain(context.Background(), []string{"sft", "--url", s.url, "--data", dir, "--model", "local/cli/nobase", "--base", "nope", "--file", file}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), `base model "nope" is not served`) || !strings.Contains(errb.String(), "(nothing was created)") {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	errb.Reset()
	// A data URL the server refuses (no --train-data-root): the job is refused after the model
	// was created, and the model is deleted again.
	code = runTrain(context.Background(), []string{"sft", "--url", s.url, "--data", dir, "--model", "local/cli/refused", "--data-url", "/etc/passwd"}, &out, &errb)
	if code == 0 || !strings.Contains(errb.String(), "was deleted again") {
		t.Fatalf("exit %d\nstderr:\n%s", code, errb.String())
	}
	code, _, b := do(t, "GET", s.url+"/v1/preview/models", bearer, "")
	if code != 200 || strings.Contains(string(b), "nobase") || strings.Contains(string(b), "refused") {
		t.Fatalf("models left: %d %s", code, b)
	}
}

// TestWorkerChatTemplate: `hone worker` takes --chat-template as hone serve does: a job on a
// model whose only template is the flag's runs there; without the flag the worker refuses
// to start, naming it.
func TestWorkerChatTemplate(t *testing.T) {
	models := t.TempDir()
	bare := filepath.Join(models, "bare")
	if _, err := synth.WriteFamily(bare, synth.Tiny("llama"), bareFamily); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(models, "custom.jinja")
	os.WriteFile(file, []byte(customTemplate), 0o644)
	dir := t.TempDir()
	flags := []string{"--no-demo-model", "--model", "bare=" + bare, "--chat-template", "bare=" + file}
	s := startServer(t, dir, append([]string{"--train-workers", "0"}, flags...)...)
	bearer := "Bearer " + initialKey(t, dir)
	u := s.url + "/v1/preview"
	code, _, body := do(t, "POST", u+"/models", bearer, `{"project":"p","name":"w","base_model":"bare"}`)
	id := jsonOf(t, code, body, 200)["id"].(string)
	code, _, body = do(t, "POST", u+"/files", bearer, sftData)
	url := jsonOf(t, code, body, 200)["url"].(string)
	code, _, body = do(t, "POST", u+"/sft-training-jobs", bearer, `{"model_id":"`+id+`","training_data_url":"`+url+`"}`)
	job := jsonOf(t, code, body, 200)["id"].(string)

	var stderr bytes.Buffer
	if code := runWorker(context.Background(), []string{"--data", dir, "--no-demo-model", "--model", "bare=" + bare}, io.Discard, &stderr, nil); code == 0 || !strings.Contains(stderr.String(), "--chat-template bare=FILE") {
		t.Fatalf("worker without the flag: exit %d, %s", code, stderr.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() { done <- runWorker(ctx, append([]string{"--data", dir}, flags...), io.Discard, io.Discard, nil) }()
	defer func() {
		cancel()
		<-done
	}()
	if j := waitJob(t, s, bearer, job); j["status"] != "SUCCEEDED" {
		t.Fatalf("job %v", j)
	}
}

func TestSplitTemplateFlag(t *testing.T) {
	files := map[string]bool{"/t/a=b.jinja": true}
	exists := func(p string) bool { return files[p] }
	for _, c := range []struct{ v, name, file string }{
		{"x.jinja", "", "x.jinja"},
		{"smol=x.jinja", "smol", "x.jinja"},
		{"org/m:1=/t/x.jinja", "org/m:1", "/t/x.jinja"},
		{"/t/a=b.jinja", "", "/t/a=b.jinja"},
		{"{% set x = 1 %}{{ x }}", "", "{% set x = 1 %}{{ x }}"},
		{"=x.jinja", "", "=x.jinja"},
	} {
		if n, f := splitTemplateFlag(c.v, exists); n != c.name || f != c.file {
			t.Errorf("%q: %q %q, want %q %q", c.v, n, f, c.name, c.file)
		}
	}
}

func FuzzSplitTemplateFlag(f *testing.F) {
	for _, s := range []string{"x.jinja", "smol=x.jinja", "{% set a = 1 %}", "a=b=c", "="} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		name, file := splitTemplateFlag(v, func(string) bool { return false })
		if name == "" && file != v || name != "" && name+"="+file != v {
			t.Fatalf("%q read as %q=%q", v, name, file)
		}
		if strings.ContainsAny(name, "={} ") {
			t.Fatalf("%q: model name %q", v, name)
		}
	})
}
