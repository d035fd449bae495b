// Package chattemplate renders Hugging Face chat templates (the Jinja `chat_template` of
// tokenizer_config.json) with transformers' semantics, on gonja v2.
//
// The environment is HF's: trim_blocks, lstrip_blocks, loop controls, no autoescape, the
// globals raise_exception(msg) and strftime_now(fmt), and a tojson filter that prints as
// Python's json.dumps does (", " and ": " separators, ensure_ascii=False, keys in the order
// they arrived, indent= and sort_keys=). JSON objects from the request (messages, tools,
// documents, tool-call arguments, chat_template_kwargs) become ordered dictionaries, so
// iteration, `.items()` and `tojson` see keys in arrival order, as Python does.
//
// `%` follows Python: printf-style formatting when the left side is a string (gonja alone
// knows only integer modulo, so Compile rewrites each `%` into a filter; see pyformat.go).
// Two more gaps of gonja are closed the same way: a conditional expression inside brackets
// (`'x' + (a if b else c)`, as Gemma 3's template writes) is rewritten before parsing
// (ifexpr.go), and negative subscripts reach the first item (`xs[-1]` of a one-item list;
// negindex.go).
//
// A difference from Python Jinja2 that remains (gonja's): the `format` filter takes Go verbs.
package chattemplate

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"

	"github.com/honeai/hone/internal/pyjson"
)

// TemplateError is an error raised while rendering: raise_exception in the template, or a
// runtime failure. The HTTP layer reports it as a 400.
type TemplateError struct{ Msg string }

func (e *TemplateError) Error() string { return e.Msg }

// MediaPartError is a message content part that is not text (an image, audio, video or
// file): the models Hone serves read text only. Path names the part
// ("messages[1].content[0]"); Type is its type.
type MediaPartError struct{ Path, Type string }

func (e *MediaPartError) Error() string {
	return fmt.Sprintf("%s: a content part of type %q needs a multimodal model", e.Path, e.Type)
}

// mediaParts are the content part types of images, audio, video and files in the OpenAI API
// and vLLM's extensions.
var mediaParts = map[string]bool{
	"image_url": true, "input_image": true, "image_embeds": true, "image_pil": true,
	"audio_url": true, "input_audio": true, "audio_embeds": true, "video_url": true,
	"file": true, "input_file": true,
}

// Template is a compiled chat template. It is safe for concurrent use.
type Template struct {
	src string
	tpl *exec.Template
	// contentParts: the template iterates over message content, so list content is passed
	// through as parts (vLLM's "openai" content format); otherwise parts are joined as text.
	contentParts bool
	caps         capsOnce
}

var (
	envOnce sync.Once
	env     *exec.Environment
	cfg     *config.Config
)

func environment() (*exec.Environment, *config.Config) {
	envOnce.Do(func() {
		gonja.SetLoggerOutput(nopWriter{})
		cfg = config.New()
		cfg.TrimBlocks = true
		cfg.LeftStripBlocks = true
		cfg.KeepTrailingNewline = false
		filters := exec.NewFilterSet(map[string]exec.FilterFunction{})
		filters.Update(builtins.Filters)
		filters.Replace("tojson", filterToJSON)
		filters.Replace("items", filterItems)
		_ = filters.Register(modFilter, filterMod)
		_ = filters.Register(modTupleFilter, filterModTuple)
		_ = filters.Register(indexFilter, filterIndex)
		ctx := exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables)
		ctx.Set("raise_exception", func(msg string) (string, error) { return "", errors.New(raiseMark + msg + raiseMark) })
		ctx.Set("strftime_now", func(format string) string { return strftime(time.Now(), format) })
		methods := builtins.Methods
		dm := map[string]exec.Method[map[string]any]{}
		for _, name := range []string{"get", "pop", "setdefault", "update", "copy", "clear", "fromkeys", "popitem"} {
			if m, ok := methods.Dict.Get(name); ok {
				dm[name] = m
			}
		}
		dm["items"], dm["keys"], dm["values"] = dictItems, dictKeys, dictValues
		methods.Dict = exec.NewMethodSet(dm)
		env = &exec.Environment{Context: ctx, Filters: filters, Tests: builtins.Tests,
			ControlStructures: builtins.ControlStructures, Methods: methods}
	})
	return env, cfg
}

type nopWriter struct{}

func (nopWriter) Write(p []byte) (int, error) { return len(p), nil }

var contentLoop = regexp.MustCompile(`\{%-?\s*for\s+\w+\s+in\s+\w+(\.content|\[['"]content['"]\])`)

// Compile parses a chat template.
func Compile(src string) (t *Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("chat template: %v", r)
		}
	}()
	e, c := environment()
	loader, err := loaders.NewFileSystemLoader("")
	if err != nil {
		return nil, err
	}
	root := "chat_template"
	shifted, err := loaders.NewShiftedLoader(root, strings.NewReader(rewriteConditionals(src)), loader)
	if err != nil {
		return nil, err
	}
	tpl, err := exec.NewTemplate(root, c, shifted, e)
	if err != nil {
		return nil, fmt.Errorf("chat template: %w", err)
	}
	rewriteModulo(tpl.Root())
	return &Template{src: src, tpl: tpl, contentParts: contentLoop.MatchString(src)}, nil
}

// Source returns the template text.
func (t *Template) Source() string { return t.src }

// Input is what a chat request gives the template. JSON fields are raw JSON as received.
type Input struct {
	Messages             []byte // JSON array of messages
	Tools                []byte // JSON array or nil
	Documents            []byte // JSON array or nil
	AddGenerationPrompt  bool
	ContinueFinalMessage bool
	// SpecialTokens are bos_token, eos_token, ... from the tokenizer config.
	SpecialTokens map[string]string
	// Kwargs is a JSON object (chat_template_kwargs, with reasoning_effort and the like
	// merged in by the caller) whose keys become template variables, or nil.
	Kwargs []byte
	// Now is the time strftime_now formats; zero means the time of rendering.
	Now time.Time
}

// Render renders the conversation.
func (t *Template) Render(in Input) (string, error) {
	msgs, err := parseMessages(in.Messages, t.contentParts)
	if err != nil {
		return "", err
	}
	return t.render(msgs, in)
}

func (t *Template) render(msgs []any, in Input) (out string, err error) {
	vars := map[string]any{}
	for k, v := range in.SpecialTokens {
		vars[k] = v
	}
	if len(in.Kwargs) > 0 {
		kw, err := pyjson.Parse(in.Kwargs)
		if err != nil || kw.Kind != pyjson.Object {
			return "", &TemplateError{Msg: "chat_template_kwargs must be a JSON object"}
		}
		for _, m := range kw.Obj {
			vars[m.Key] = toValue(m.Val)
		}
	}
	vars["messages"] = msgs
	vars["add_generation_prompt"] = in.AddGenerationPrompt
	if now := in.Now; !now.IsZero() {
		vars["strftime_now"] = func(format string) string { return strftime(now, format) }
	}
	if len(in.Tools) > 0 && string(in.Tools) != "null" {
		v, err := parseArray(in.Tools, "tools")
		if err != nil {
			return "", err
		}
		vars["tools"] = v
	} else {
		vars["tools"] = nil
	}
	if len(in.Documents) > 0 && string(in.Documents) != "null" {
		v, err := parseArray(in.Documents, "documents")
		if err != nil {
			return "", err
		}
		vars["documents"] = v
	} else {
		vars["documents"] = nil
	}
	defer func() {
		if r := recover(); r != nil {
			out, err = "", &TemplateError{Msg: fmt.Sprintf("chat template failed: %v", r)}
		}
	}()
	s, err := t.tpl.ExecuteToString(exec.NewContext(vars))
	if err != nil {
		msg := err.Error()
		if i := strings.Index(msg, raiseMark); i >= 0 {
			rest := msg[i+len(raiseMark):]
			if j := strings.Index(rest, raiseMark); j >= 0 {
				return "", &TemplateError{Msg: rest[:j]}
			}
		}
		return "", &TemplateError{Msg: "chat template failed: " + msg}
	}
	if in.ContinueFinalMessage {
		return continueFinal(s, msgs)
	}
	return s, nil
}

// raiseMark brackets the message of raise_exception inside gonja's wrapped errors.
const raiseMark = "\x00raise\x00"

// continueFinal cuts the rendered text right after the final message's content, as
// transformers does for continue_final_message.
func continueFinal(rendered string, msgs []any) (string, error) {
	if len(msgs) == 0 {
		return "", &TemplateError{Msg: "continue_final_message is set but there are no messages"}
	}
	final := ""
	if d, ok := msgs[len(msgs)-1].(exec.Dict); ok {
		switch c := dictGet(d, "content").(type) {
		case string:
			final = c
		case []any:
			if len(c) > 0 {
				if p, ok := c[len(c)-1].(exec.Dict); ok {
					final, _ = dictGet(p, "text").(string)
				}
			}
		}
	}
	if i := strings.LastIndex(rendered, final); i >= 0 && final != "" {
		return rendered[:i+len(final)], nil
	}
	trimmed := strings.TrimSpace(final)
	if i := strings.LastIndex(rendered, trimmed); i >= 0 && trimmed != "" {
		return rendered[:i+len(trimmed)], nil
	}
	return "", &TemplateError{Msg: "continue_final_message is set but the final message does not appear in the chat after applying the chat template! This can happen if the chat template deletes portions of the final message. Please verify the chat template and final message in your chat to ensure they are compatible."}
}

// Span is a byte range [Start, End) of the rendered text. Tail is the length of the
// template's end-of-turn text at the span's end (for example "<|im_end|>\n"), the part of
// the span that the message's own text does not make: [Start, End−Tail) is the message's
// body as the template renders it (content, reasoning, tool calls).
type Span struct{ Start, End, Tail int }

// AssistantSpans renders the conversation and returns it with the byte ranges of each
// assistant message's turn (its content and the template's end-of-turn text after it, up to
// where the next message starts), found by rendering each prefix of the conversation with a
// generation prompt and without. A template that renders earlier turns differently once later
// ones exist (for example dropping past reasoning, or Qwen3's empty think block, which only
// the last turn gets) still gives correct spans for the final text: each span is located in
// the full rendering by its text, or else from where its generation prompt ends in the full
// rendering up to the end-of-turn text.
func (t *Template) AssistantSpans(in Input) (string, []Span, error) {
	msgs, err := parseMessages(in.Messages, t.contentParts)
	if err != nil {
		return "", nil, err
	}
	base := in
	base.ContinueFinalMessage = false
	base.AddGenerationPrompt = false
	full, err := t.render(msgs, base)
	if err != nil {
		return "", nil, err
	}
	var spans []Span
	for i, m := range msgs {
		d, ok := m.(exec.Dict)
		if !ok || dictGet(d, "role") != "assistant" {
			continue
		}
		pin := base
		pin.AddGenerationPrompt = true
		before, err := t.render(msgs[:i], pin)
		if err != nil {
			return "", nil, err
		}
		upto, err := t.render(msgs[:i+1], base)
		if err != nil {
			return "", nil, err
		}
		if !strings.HasPrefix(upto, before) {
			return "", nil, &TemplateError{Msg: fmt.Sprintf("chat template: the rendering of message %d does not extend the generation prompt before it, so its assistant tokens cannot be located", i)}
		}
		turn := upto[len(before):]
		tail := t.endOfTurn(msgs[:i], base)
		if !strings.HasSuffix(turn, tail) {
			tail = ""
		}
		// Locate the turn in the full rendering at the same offset when the prefix is kept.
		if strings.HasPrefix(full, upto) {
			spans = append(spans, Span{len(before), len(upto), len(tail)})
			continue
		}
		if j := strings.Index(full[lastEnd(spans):], turn); j >= 0 {
			s := lastEnd(spans) + j
			spans = append(spans, Span{s, s + len(turn), len(tail)})
			continue
		}
		// The body is in place but the end of turn differs inside the conversation (Phi-3's
		// templates write eos after the last turn only): the span ends with the part of the
		// final end-of-turn text that the conversation has too, up to a marker's end.
		if body := turn[:len(turn)-len(tail)]; tail != "" && len(before) >= lastEnd(spans) && strings.HasPrefix(full, before+body) {
			if k := sharedTail(tail, full[len(before)+len(body):]); k > 0 {
				spans = append(spans, Span{len(before), len(before) + len(body) + k, k})
				continue
			}
		}
		// The turn renders differently inside the whole conversation: it starts where its
		// generation prompt ends and ends with the end-of-turn text.
		if tail != "" && len(before) >= lastEnd(spans) && strings.HasPrefix(full, before) {
			if j := strings.Index(full[len(before):], tail); j >= 0 {
				spans = append(spans, Span{len(before), len(before) + j + len(tail), len(tail)})
				continue
			}
		}
		return "", nil, &TemplateError{Msg: fmt.Sprintf("chat template: assistant message %d renders differently inside the whole conversation", i)}
	}
	return full, spans, nil
}

// sharedTail is how much of the end-of-turn text tail the rendering goes on with (rest): their
// common prefix, cut back, where they part, to just after its last newline, '>' or ']', so
// that it does not end inside the marker of the next turn ("<|end|>\n<|" of "<|end|>\n<|user|>"
// is "<|end|>\n").
func sharedTail(tail, rest string) int {
	k := 0
	for k < len(tail) && k < len(rest) && tail[k] == rest[k] {
		k++
	}
	if k == len(tail) {
		return k
	}
	if i := strings.LastIndexAny(tail[:k], "\n>]"); i >= 0 {
		return i + 1
	}
	return k
}

// turnMark stands for an assistant message's content while endOfTurn finds what the template
// writes after it.
const turnMark = "\x00hone-turn\x00"

// endOfTurn is the text the template writes after the content of an assistant message that
// follows msgs ("" when it cannot tell).
func (t *Template) endOfTurn(msgs []any, in Input) string {
	var d exec.Dict
	dictSet(&d, "role", "assistant")
	dictSet(&d, "content", turnMark)
	probe := append(slices.Clone(msgs), d)
	s, err := t.render(probe, in)
	if err != nil {
		return ""
	}
	i := strings.LastIndex(s, turnMark)
	if i < 0 {
		return ""
	}
	return s[i+len(turnMark):]
}

// TurnEnd is the text the template writes after an assistant message's content to close its
// turn ("<|im_end|>\n", "<end_of_turn>\n", "<|eot_id|>", "</s>"), found by rendering a user
// message and an assistant reply; "" when it cannot tell. special are the tokenizer's
// bos_token, eos_token, ...
func (t *Template) TurnEnd(special map[string]string) string {
	var u exec.Dict
	dictSet(&u, "role", "user")
	dictSet(&u, "content", "Hi")
	return t.endOfTurn([]any{u}, Input{SpecialTokens: special})
}

func lastEnd(spans []Span) int {
	if len(spans) == 0 {
		return 0
	}
	return spans[len(spans)-1].End
}

// strftime formats t with Python's strftime directives (the common ones).
func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'Y':
			fmt.Fprintf(&b, "%d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			h := t.Hour() % 12
			if h == 0 {
				h = 12
			}
			fmt.Fprintf(&b, "%02d", h)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			if t.Hour() < 12 {
				b.WriteString("AM")
			} else {
				b.WriteString("PM")
			}
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'a':
			b.WriteString(t.Weekday().String()[:3])
		case 'A':
			b.WriteString(t.Weekday().String())
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case 'Z':
			name, _ := t.Zone()
			b.WriteString(name)
		case 'z':
			b.WriteString(t.Format("-0700"))
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			b.WriteByte(f[i])
		}
	}
	return b.String()
}
