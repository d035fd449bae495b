// Package toolcall finds the tool calls in a model's output, for the chat-template families
// whose call syntax Hone knows:
//
//   - hermes: `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, one or more in a
//     row (Qwen2.5, Qwen3, SmolLM3 and Hermes templates);
//   - llama3_json: `{"name": ..., "parameters": {...}}` at the start of the output, optionally
//     after `<|python_tag|>`, several separated by `;` (Llama 3.1/3.2/3.3 templates);
//   - mistral: `[TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]`, or the newer
//     `[TOOL_CALLS]name[ARGS]{...}` (Mistral-Instruct templates). Mistral's tokenizers make
//     [TOOL_CALLS] a special token, which detokenisation skips, so a bare
//     `[{"name": ...}]` at the start of the output is a call too.
//
// Parse reads a finished text; Stream reads it as it grows and says what became visible: text
// before the first call, each call's name once complete, and its arguments as they grow, as
// OpenAI's streamed tool-call deltas need. Both work on the same scan of the text, so the
// calls a stream reports add up to those Parse finds. Arguments are the JSON text of the
// call's arguments value as the model wrote it (a JSON string value is decoded to its text).
//
// The package knows nothing of HTTP or of the engine: the inference output processing runs a
// Stream per choice and the chat API assembles the messages.
package toolcall

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"strings"
)

// Parser families.
const (
	Hermes     = "hermes"
	Llama3JSON = "llama3_json"
	Mistral    = "mistral"
	// Generic is Hone's call format for templates that show no call syntax of their own:
	// hermes' `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, with the tools
	// described to the model and earlier calls and results written into the conversation
	// by Generic's Prepare where the template does not render them.
	Generic = "generic"
	// None refuses tool_choice required, named and explicit auto (vLLM's behaviour without a
	// parser).
	None = "none"
)

// Families lists the parsers a server may be told to use (--tool-call-parser).
var Families = []string{Hermes, Llama3JSON, Mistral, Generic, None}

// syntaxOf is the family whose syntax a family's calls are written in.
func syntaxOf(family string) string {
	if family == Generic {
		return Hermes
	}
	return family
}

// Valid reports whether name is a known parser family.
func Valid(name string) bool {
	for _, f := range Families {
		if f == name {
			return true
		}
	}
	return false
}

// Detect names the family of a chat template by what it emits for tool calls: `<tool_call>`
// (hermes), `[TOOL_CALLS]` (mistral), `<|python_tag|>` or Llama 3's `"parameters": `
// inside header-id turns (llama3_json); None when the template shows no call syntax.
func Detect(template string) string {
	switch {
	case strings.Contains(template, "<tool_call>"):
		return Hermes
	case strings.Contains(template, "[TOOL_CALLS]"):
		return Mistral
	case strings.Contains(template, "<|python_tag|>"),
		strings.Contains(template, "<|start_header_id|>") && strings.Contains(template, `"parameters": `):
		return Llama3JSON
	}
	return None
}

// Choose is the family a model's calls are read with: the configured parser
// (--tool-call-parser), else the one its chat template shows, else Generic.
func Choose(configured, template string) string {
	if configured != "" {
		return configured
	}
	if f := Detect(template); f != None {
		return f
	}
	return Generic
}

// Call is one parsed tool call.
type Call struct {
	Name      string
	Arguments string // JSON text
}

// Options changes how a text is read.
type Options struct {
	// Forced says the output was generated as calls from its first token (tool_choice
	// required or a named function): a call body at the very start, without its family's
	// marker, is a call for every family.
	Forced bool
	// Single keeps only the first call (parallel_tool_calls false).
	Single bool
}

// Parse finds the calls in a finished text: content is the text before the first call and
// calls are the complete calls. Output can end anywhere (max_tokens, a stop string, a
// cancel), so a call the text cuts short is dropped with its markup, and complete calls
// before it are kept; so is anything that follows the calls. ok reports that the text was
// read as calls: false when it holds no call, or something after a marker that cannot be a
// call (then content is the whole text). ok with no calls means the text ended inside its
// first call: content is what came before it.
func Parse(family, text string, o Options) (content string, calls []Call, ok bool) {
	sc := scan(family, text, true, o)
	if sc.started && sc.valid && len(sc.calls) > 0 && allComplete(sc.calls) {
		for _, c := range sc.calls {
			calls = append(calls, Call{Name: c.name, Arguments: c.argsText()})
		}
		return text[:sc.contentEnd], calls, true
	}
	// Read it as a text still growing: the complete calls, and what may still become one.
	gr := scan(family, text, false, o)
	if !gr.started {
		if o.Forced && gr.contentEnd == 0 && strings.TrimSpace(text) != "" {
			return "", nil, true // a forced call cut before its name
		}
		return text, nil, false
	}
	for _, c := range gr.calls {
		if !c.complete() {
			break
		}
		calls = append(calls, Call{Name: c.name, Arguments: c.argsText()})
	}
	if len(calls) == 0 && !gr.valid {
		return text, nil, false
	}
	return text[:gr.contentEnd], calls, true
}

func allComplete(calls []partial) bool {
	for _, c := range calls {
		if !c.complete() {
			return false
		}
	}
	return true
}

// NewID returns a tool call id: "call_" and 24 random letters and digits (OpenAI's form).
func NewID() string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 24)
	rand.Read(b)
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return "call_" + string(b)
}

// CallDelta is what became visible of one call: on its first delta its id and name (with
// empty arguments), then fragments of its arguments.
type CallDelta struct {
	Index     int
	ID        string // first delta only
	Name      string // first delta only
	Arguments string
}

// Delta is what a Stream step made visible.
type Delta struct {
	Content string
	Calls   []CallDelta
}

// Stream follows one growing text.
type Stream struct {
	family string
	o      Options
	text   string
	sent   int // content bytes sent
	calls  []sentCall
}

type sentCall struct {
	id string
}

// NewStream returns a stream for a family's output.
func NewStream(family string, o Options) *Stream { return &Stream{family: family, o: o} }

// Calls is how many calls the stream has reported.
func (s *Stream) Calls() int { return len(s.calls) }

// Feed adds text and returns what became visible: content before the first call, and each
// call once it is complete (its id and name, then its arguments whole), so that a call the
// output cuts short is never sent and the stream adds up to what Parse finds in the whole
// text. With final the text is complete: text held back as a possible start of a call is
// released when it holds no call.
func (s *Stream) Feed(text string, final bool) Delta {
	s.text += text
	var d Delta
	var content string
	var calls []Call
	if final {
		var ok bool
		content, calls, ok = Parse(s.family, s.text, s.o)
		if !ok {
			content = s.text
		}
	} else {
		sc := scan(s.family, s.text, false, s.o)
		content = s.text[:sc.contentEnd]
		for _, c := range sc.calls {
			if !c.complete() {
				break
			}
			calls = append(calls, Call{Name: c.name, Arguments: c.argsText()})
		}
	}
	if len(content) > s.sent && len(s.calls) == 0 {
		d.Content = content[s.sent:]
		s.sent = len(content)
	}
	for i := len(s.calls); i < len(calls); i++ {
		s.calls = append(s.calls, sentCall{id: NewID()})
		d.Calls = append(d.Calls, CallDelta{Index: i, ID: s.calls[i].id, Name: calls[i].Name}, CallDelta{Index: i, Arguments: calls[i].Arguments})
	}
	return d
}

// partial is one call as far as the text goes.
type partial struct {
	name       string
	nameDone   bool
	args       string // raw JSON of the arguments value so far
	argsStart  int    // -1 until the arguments value begins
	argsDone   bool
	argsString bool // the arguments value is a JSON string
	objDone    bool // the call's object (or mistral's name[ARGS]{...}) closed
}

func (c *partial) complete() bool { return c.nameDone && c.objDone }

// argsText is the arguments as a client gets them.
func (c *partial) argsText() string {
	if !c.argsDone {
		return "{}"
	}
	if c.argsString {
		var s string
		if json.Unmarshal([]byte(c.args), &s) == nil {
			return s
		}
	}
	return c.args
}

// scanResult is a text scanned for calls.
type scanResult struct {
	contentEnd int  // text before this is content (the rest held back or calls)
	started    bool // a call begins in the text
	valid      bool // what follows the start is a valid (prefix of a) call sequence
	calls      []partial
}

const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
	pythonTag   = "<|python_tag|>"
	mistralTag  = "[TOOL_CALLS]"
	mistralArgs = "[ARGS]"
)

// scan reads text as the family writes calls. Before a call starts, the longest end of the
// text that could begin a call marker is held back (contentEnd before it).
func scan(family, text string, final bool, o Options) scanResult {
	r := scanResult{contentEnd: len(text), valid: true}
	family = syntaxOf(family)
	var markers []string
	switch family {
	case Hermes:
		markers = []string{hermesOpen}
	case Llama3JSON:
		markers = []string{pythonTag}
	case Mistral:
		markers = []string{mistralTag}
	default:
		return r
	}
	// A call body at the start, without a marker.
	lead := len(text) - len(strings.TrimLeft(text, " \t\r\n"))
	body := text[lead:]
	if family == Llama3JSON || family == Mistral || o.Forced {
		open := byte('{')
		if family == Mistral {
			open = '['
		}
		switch {
		case body == "" && !final:
			r.contentEnd = 0 // whitespace so far: a call may still begin
			return r
		case body != "" && body[0] == open:
			var calls []partial
			var ok bool
			switch family {
			case Mistral:
				calls, ok = scanMistral(body, final)
			case Llama3JSON:
				calls, ok = scanLlama(body, final)
			default:
				calls, ok = scanHermes(body, final, false)
			}
			if ok && len(calls) > 0 && calls[0].nameDone {
				r.started, r.contentEnd, r.calls = true, 0, single(calls, o)
				return r
			}
			if ok && !final {
				r.contentEnd = 0 // may still become a call
				return r
			}
		}
	}
	at := -1
	marker := ""
	for _, m := range markers {
		if i := strings.Index(text, m); i >= 0 && (at < 0 || i < at) {
			at, marker = i, m
		}
	}
	if at < 0 {
		if !final {
			r.contentEnd = holdBack(text, markers)
		}
		return r
	}
	r.started, r.contentEnd = true, at
	rest := text[at+len(marker):]
	switch family {
	case Hermes:
		r.calls, r.valid = scanHermes(rest, final, true)
	case Llama3JSON:
		r.calls, r.valid = scanLlama(strings.TrimLeft(rest, " \t\r\n"), final)
	case Mistral:
		r.calls, r.valid = scanMistral(strings.TrimLeft(rest, " \t\r\n"), final)
	}
	r.calls = single(r.calls, o)
	return r
}

func single(calls []partial, o Options) []partial {
	if o.Single && len(calls) > 1 {
		return calls[:1]
	}
	return calls
}

// holdBack is where content ends when the text's end may begin one of the markers.
func holdBack(text string, markers []string) int {
	end := len(text)
	for _, m := range markers {
		for n := min(len(m)-1, len(text)); n > 0; n-- {
			if strings.HasSuffix(text, m[:n]) {
				end = min(end, len(text)-n)
				break
			}
		}
	}
	return end
}

func skipWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// prefixOf reports whether s[i:] is a (possibly empty) prefix of lit; full whether it holds
// all of lit.
func prefixOf(s string, i int, lit string) (ok, full bool) {
	rest := s[i:]
	if strings.HasPrefix(rest, lit) {
		return true, true
	}
	return strings.HasPrefix(lit, rest), false
}

// scanHermes reads `{...}</tool_call>` (after the first opening tag when tagged) and further
// `<tool_call>{...}</tool_call>`; whitespace between. Text after the last call is ignored.
func scanHermes(s string, final, tagged bool) ([]partial, bool) {
	var calls []partial
	i := 0
	for {
		i = skipWS(s, i)
		c, n, ok := scanObject(s[i:], final)
		if !ok {
			return calls, false
		}
		calls = append(calls, c)
		if !c.objDone {
			return calls, true
		}
		i = skipWS(s, i+n)
		if tagged {
			ok, full := prefixOf(s, i, hermesClose)
			if !ok || !full {
				return calls, true // lenient: a missing or partial closing tag
			}
			i = skipWS(s, i+len(hermesClose))
		}
		ok, full := prefixOf(s, i, hermesOpen)
		if !tagged && i < len(s) && s[i] == '{' {
			continue
		}
		if !ok || !full {
			return calls, true // trailing text (or a tag still arriving) after the calls
		}
		i += len(hermesOpen)
	}
}

// scanLlama reads `{...}` calls separated by `;`.
func scanLlama(s string, final bool) ([]partial, bool) {
	var calls []partial
	i := 0
	for {
		c, n, ok := scanObject(s[i:], final)
		if !ok {
			return calls, false
		}
		calls = append(calls, c)
		if !c.objDone {
			return calls, true
		}
		i = skipWS(s, i+n)
		if i >= len(s) || s[i] != ';' {
			return calls, true
		}
		i = skipWS(s, i+1)
		if i >= len(s) {
			return calls, true
		}
	}
}

// scanMistral reads `[{...}, {...}]` or `name[ARGS]{...}` (repeated after [TOOL_CALLS]).
func scanMistral(s string, final bool) ([]partial, bool) {
	if strings.HasPrefix(s, "[") {
		var calls []partial
		i := skipWS(s, 1)
		for {
			if i >= len(s) {
				return calls, true
			}
			c, n, ok := scanObject(s[i:], final)
			if !ok {
				return calls, false
			}
			calls = append(calls, c)
			if !c.objDone {
				return calls, true
			}
			i = skipWS(s, i+n)
			if i >= len(s) {
				return calls, true // lenient: the closing bracket missing
			}
			switch s[i] {
			case ',':
				i = skipWS(s, i+1)
			case ']':
				return calls, true
			default:
				return calls, false
			}
		}
	}
	var calls []partial
	for s != "" {
		j := strings.Index(s, mistralArgs)
		if j < 0 {
			// The name is still arriving: a plain name, then perhaps part of [ARGS].
			name := s[:holdBack(s, []string{mistralArgs})]
			return calls, !final && validName(name)
		}
		name := strings.TrimSpace(s[:j])
		if !validName(name) || name == "" {
			return calls, false
		}
		rest := s[j+len(mistralArgs):]
		c, n, ok := scanValue(rest, final)
		if !ok {
			return calls, false
		}
		c.name, c.nameDone = name, true
		calls = append(calls, c)
		if !c.objDone {
			return calls, true
		}
		s = strings.TrimLeft(rest[n:], " \t\r\n")
		if !strings.HasPrefix(s, mistralTag) {
			return calls, true
		}
		s = s[len(mistralTag):]
	}
	return calls, true
}

func validName(s string) bool {
	for _, r := range s {
		if !(r == '_' || r == '-' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// scanValue reads a whole JSON value as a call's arguments (mistral's name[ARGS]{...}).
func scanValue(s string, final bool) (partial, int, bool) {
	c := partial{argsStart: -1}
	i := skipWS(s, 0)
	if i == len(s) {
		return c, i, !final
	}
	c.argsStart = i
	n, done, ok := valueEnd(s[i:])
	if !ok {
		return c, 0, false
	}
	c.args = s[i : i+n]
	c.argsString = s[i] == '"'
	if !argsOK(c.args, done) {
		return c, 0, false
	}
	if done {
		c.argsDone, c.objDone = true, true
	} else if final {
		return c, 0, false
	}
	return c, i + n, true
}

// scanObject reads a call object `{"name": "...", "arguments"|"parameters": value}` as far as
// s goes: n is the bytes read, ok false when s cannot begin such an object (or, final, does
// not hold one whole).
func scanObject(s string, final bool) (c partial, n int, ok bool) {
	c.argsStart = -1
	if s == "" {
		return c, 0, !final
	}
	if s[0] != '{' {
		return c, 0, false
	}
	i := 1
	for {
		i = skipWS(s, i)
		if i >= len(s) {
			return c, i, !final
		}
		if s[i] == '}' && !c.nameDone && c.argsStart < 0 && i == skipWS(s, 1) {
			return c, 0, false // {} is no call
		}
		if s[i] != '"' {
			return c, 0, false
		}
		kn, kdone, kok := valueEnd(s[i:])
		if !kok {
			return c, 0, false
		}
		if !kdone {
			return c, len(s), !final
		}
		var key string
		if json.Unmarshal([]byte(s[i:i+kn]), &key) != nil {
			return c, 0, false
		}
		i = skipWS(s, i+kn)
		if i >= len(s) {
			return c, i, !final
		}
		if s[i] != ':' {
			return c, 0, false
		}
		i = skipWS(s, i+1)
		if i >= len(s) {
			return c, i, !final
		}
		vn, vdone, vok := valueEnd(s[i:])
		if !vok {
			return c, 0, false
		}
		switch key {
		case "name":
			if s[i] != '"' {
				return c, 0, false
			}
			if vdone {
				if json.Unmarshal([]byte(s[i:i+vn]), &c.name) != nil || c.name == "" {
					return c, 0, false
				}
				c.nameDone = true
			}
		case "arguments", "parameters":
			if c.argsStart >= 0 {
				return c, 0, false // two argument values
			}
			c.argsStart, c.args, c.argsDone, c.argsString = i, s[i:i+vn], vdone, s[i] == '"'
			if !argsOK(c.args, vdone) {
				return c, 0, false
			}
		}
		if !vdone {
			return c, len(s), !final
		}
		i = skipWS(s, i+vn)
		if i >= len(s) {
			return c, i, !final
		}
		switch s[i] {
		case ',':
			i++
		case '}':
			if !c.nameDone {
				return c, 0, false
			}
			c.objDone = true
			return c, i + 1, true
		default:
			return c, 0, false
		}
	}
}

// argsOK reports whether raw can be (done: is) a call's arguments: a JSON object, or a
// JSON string holding one.
func argsOK(raw string, done bool) bool {
	if raw == "" {
		return !done
	}
	switch raw[0] {
	case '{':
		return true
	case '"':
		if !done {
			return true
		}
		var inner string
		if json.Unmarshal([]byte(raw), &inner) != nil {
			return false
		}
		inner = strings.TrimSpace(inner)
		return strings.HasPrefix(inner, "{") && json.Valid([]byte(inner))
	}
	return false
}

// valueEnd finds the end of the JSON value that s begins with: n bytes, done when the value
// is whole; ok false when s cannot begin a JSON value. Only the structure is checked here
// (strings, nesting, literal characters); a whole value is then checked with json.Valid.
func valueEnd(s string) (n int, done, ok bool) {
	if s == "" {
		return 0, false, true
	}
	switch c := s[0]; {
	case c == '"':
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '"':
				return i + 1, true, json.Valid([]byte(s[:i+1]))
			}
		}
		return len(s), false, true
	case c == '{' || c == '[':
		depth := 0
		for i := 0; i < len(s); i++ {
			switch s[i] {
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true, json.Valid([]byte(s[:i+1]))
				}
			case '"':
				j := i + 1
				for ; j < len(s); j++ {
					if s[j] == '\\' {
						j++
					} else if s[j] == '"' {
						break
					}
				}
				if j >= len(s) {
					return len(s), false, true
				}
				i = j
			}
		}
		return len(s), false, true
	case c == '-' || c >= '0' && c <= '9' || c == 't' || c == 'f' || c == 'n':
		i := 0
		for i < len(s) && strings.IndexByte("+-.0123456789eEtruefalsn", s[i]) >= 0 {
			i++
		}
		if i == len(s) {
			return i, false, true // a number or literal may go on
		}
		return i, true, json.Valid([]byte(s[:i]))
	}
	return 0, false, false
}

// Describe names the call syntax of a family (for messages).
func Describe(family string) string {
	switch family {
	case Hermes, Generic:
		return `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`
	case Llama3JSON:
		return `{"name": ..., "parameters": {...}}`
	case Mistral:
		return `[TOOL_CALLS][{"name": ..., "arguments": {...}}]`
	}
	return fmt.Sprintf("no tool-call syntax (%s)", family)
}
