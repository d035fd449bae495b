package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/inference"
	"github.com/honeai/hone/internal/serving"
)

// chatTemplateFlag is one --chat-template value read: the template's source and where it
// came from.
type chatTemplateFlag struct{ src, from string }

// modelName is what a NAME= prefix of --chat-template may be (a --model NAME).
var modelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]*$`)

// chatTemplates reads the --chat-template values, as vLLM's flag: FILE (a Jinja chat
// template for every model) or NAME=FILE (for the model served as NAME); FILE may also be the
// template itself on one line, as vLLM allows. Each is read and compiled now, so that a
// mistake stops the start with the flag named. The key "" is the template for every model.
func chatTemplates(values []string) (map[string]chatTemplateFlag, error) {
	out := map[string]chatTemplateFlag{}
	for _, v := range values {
		name, file := splitTemplateFlag(v, func(p string) bool { _, err := os.Stat(p); return err == nil })
		if _, dup := out[name]; dup {
			if name == "" {
				return nil, fmt.Errorf("--chat-template %q: a template for every model is given twice", v)
			}
			return nil, fmt.Errorf("--chat-template %q: model %s is given two templates", v, name)
		}
		var t chatTemplateFlag
		switch b, err := os.ReadFile(file); {
		case err == nil:
			t = chatTemplateFlag{src: string(b), from: "--chat-template " + file}
		case strings.Contains(file, "{{") || strings.Contains(file, "{%"):
			t = chatTemplateFlag{src: file, from: "--chat-template (given inline)"}
		default:
			return nil, fmt.Errorf("--chat-template %q: %w (give FILE, a Jinja chat template, or NAME=FILE for the model served as NAME)", v, err)
		}
		if strings.TrimSpace(t.src) == "" {
			return nil, fmt.Errorf("--chat-template %q: the template is empty", v)
		}
		if _, err := chattemplate.Compile(t.src); err != nil {
			return nil, fmt.Errorf("--chat-template %q: %w", v, err)
		}
		out[name] = t
	}
	return out, nil
}

// splitTemplateFlag reads one --chat-template value as NAME=FILE or FILE: a value that names an
// existing file (exists) is a FILE, even with "=" in it; else a model name before the first
// "=" makes it NAME=FILE.
func splitTemplateFlag(v string, exists func(string) bool) (name, file string) {
	if !exists(v) {
		if n, f, ok := strings.Cut(v, "="); ok && modelName.MatchString(n) {
			return n, f
		}
	}
	return "", v
}

// loadServed loads a model as serving.Load does, with its --chat-template (its own, else,
// with all, the one for every model: the demo model takes only its own), and logs the chat template it renders with and the tokens that end
// its generation. A model without a chat template is refused with the flag that gives one.
func (s *system) loadServed(name, path string, opts serving.LoadOptions, now int64, all bool) (*serving.Served, error) {
	tpls, err := chatTemplates(s.cfg.Chat.ChatTemplates)
	if err != nil {
		return nil, err
	}
	t, ok := tpls[name]
	if !ok && all {
		t = tpls[""]
	}
	if t.src != "" || opts.ChatTemplate == "" { // a flag wins over a template the caller set (a pulled Ollama model's)
		opts.ChatTemplate, opts.ChatTemplateFrom = t.src, t.from
	}
	if s.metrics != nil { // vLLM's latency histograms, and engine spans when exporting them
		opts.Engine.Observer = inference.Tee(s.metrics.Serving.Model(name), s.tel.Engine(name))
	}
	m, err := serving.Load(name, path, opts, now)
	if errors.Is(err, serving.ErrNoChatTemplate) {
		return nil, fmt.Errorf("%w; give it one with --chat-template %s=FILE", err, name)
	}
	if err != nil {
		return nil, err
	}
	stops := make([]string, len(m.EOS))
	for i, id := range m.EOS {
		stops[i] = fmt.Sprintf("%d %s", id, m.Tok.TokenString(id))
	}
	s.log.Info("chat template", "model", name, "from", m.TemplateFrom, "stop_tokens", strings.Join(stops, ", "))
	return m, nil
}

// checkChatTemplates refuses a --chat-template NAME=FILE for a model not served.
func (s *system) checkChatTemplates() error {
	tpls, _ := chatTemplates(s.cfg.Chat.ChatTemplates)
	for name := range tpls {
		if _, ok := s.models.Get(name); name != "" && !ok {
			return fmt.Errorf("--chat-template %s=%s: no model %q is served", name, strings.TrimPrefix(tpls[name].from, "--chat-template "), name)
		}
	}
	return nil
}
