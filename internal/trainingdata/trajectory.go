package trainingdata

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
)

// TrajectoryGroup is ART's group of trajectories sampled for the same prompt.
type TrajectoryGroup struct {
	Trajectories []Trajectory   `json:"trajectories"`
	Exceptions   []any          `json:"exceptions,omitempty"`
	Metadata     map[string]any `json:"metadata,omitempty"`
}

// Trajectory is ART's trajectory: messages and sampled choices (or the exchanges ART's
// capture API records, see Normalize), a reward and metrics. A missing reward is 0.0: ART
// leaves it out of the JSON then.
type Trajectory struct {
	MessagesAndChoices  []json.RawMessage `json:"messages_and_choices,omitempty"`
	Tools               json.RawMessage   `json:"tools,omitempty"`
	AdditionalHistories []History         `json:"additional_histories,omitempty"`
	Exchanges           *Exchanges        `json:"exchanges,omitempty"`
	Reward              float64           `json:"reward"`
	Metrics             Metrics           `json:"metrics,omitempty"`
	Metadata            map[string]any    `json:"metadata,omitempty"`
	Logs                []string          `json:"logs,omitempty"`
}

// Metrics are a trajectory's metrics: numbers, or booleans (ART allows them) read as 1 and 0.
type Metrics map[string]float64

// UnmarshalJSON reads numbers and booleans.
func (m *Metrics) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	if raw == nil {
		*m = nil
		return nil
	}
	out := make(Metrics, len(raw))
	for k, v := range raw {
		var f float64
		var t bool
		switch {
		case json.Unmarshal(v, &f) == nil:
			out[k] = f
		case json.Unmarshal(v, &t) == nil:
			out[k] = 0
			if t {
				out[k] = 1
			}
		default:
			return fmt.Errorf("metric %q must be a number or a boolean, got %s", k, v)
		}
	}
	*m = out
	return nil
}

// History is an additional conversation of a trajectory (for example a sub-agent's).
type History struct {
	MessagesAndChoices []json.RawMessage `json:"messages_and_choices"`
	Tools              json.RawMessage   `json:"tools,omitempty"`
}

// Histories are the trajectory's conversations: its messages and choices (with its tools),
// then its additional histories.
func (t *Trajectory) Histories() []History {
	return append([]History{{MessagesAndChoices: t.MessagesAndChoices, Tools: t.Tools}}, t.AdditionalHistories...)
}

// choice is the part of an OpenAI choice RL reads.
type choice struct {
	FinishReason string `json:"finish_reason"`
	// StopReason is vLLM's stop_reason: null when the choice ended on an end-of-sequence
	// token, the stop string or stop token id otherwise.
	StopReason json.RawMessage `json:"stop_reason"`
	Message    json.RawMessage `json:"message"`
	Logprobs   *struct {
		Content []lpEntry `json:"content"`
	} `json:"logprobs"`
	TokenIDs []int `json:"token_ids"`
}

// lpEntry is one entry of a choice's logprobs.content.
type lpEntry struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

// Sequence is one conversation of a trajectory tokenised for RL (TokenizeTrajectory).
type Sequence struct {
	Tokens  []int
	Sampled []bool    // per token: sampled by the policy (trained)
	OldLogp []float64 // per token: sampling logprob (NaN: unknown)
	// Unknown counts the sampled tokens whose ids the choice did not say (context only, see
	// logprobs.go).
	Unknown int
}

// TokenizeTrajectory turns one conversation of ART's messages_and_choices into tokens,
// marking the tokens of each Choice (the sampled assistant turns): their ids come from the
// choice's token_ids, else from its logprobs entries (see logprobs.go), else, when allowed,
// from tokenising the turn as the template renders it; their sampling logprobs from the
// choice's logprobs. Everything else — system, user and tool turns, tools, assistant
// messages given as messages, and the template's text around each choice (the generation
// prompt, the end-of-turn text) — is context, rendered by the template.
//
// A choice's sampled tokens take the place of its turn's body (what the template renders for
// the message: content, reasoning, tool calls) in the rendered conversation: where their
// text is the rendered text (or a part of it, such as the content after a think block the
// template adds), they stand for that part; where it is not (a tool call sampled with other
// spacing than the template writes it), they replace the body, and the end-of-turn text
// follows them (less what they already hold, such as a sampled end-of-turn token).
func (c *ChatTokenizer) TokenizeTrajectory(items []json.RawMessage, tools json.RawMessage, allowNoLogprobs bool) (*Sequence, error) {
	msgs := make([]json.RawMessage, len(items))
	chosen := make([]*choice, len(items))
	for i, raw := range items {
		var probe map[string]json.RawMessage
		if err := json.Unmarshal(raw, &probe); err != nil {
			return nil, fmt.Errorf("messages_and_choices[%d] is not an object", i)
		}
		if _, isChoice := probe["message"]; isChoice {
			var ch choice
			if err := json.Unmarshal(raw, &ch); err != nil {
				return nil, fmt.Errorf("messages_and_choices[%d]: %v", i, err)
			}
			chosen[i] = &ch
			msgs[i] = ch.Message
			continue
		}
		msgs[i] = raw
	}
	all, err := templateMessages(msgs)
	if err != nil {
		return nil, err
	}
	in, err := c.input(all, tools)
	if err != nil {
		return nil, err
	}
	text, spans, err := c.Template.AssistantSpans(in)
	if err != nil {
		return nil, err
	}
	// Assistant messages in order, to pair with spans.
	var assistant []int
	for i, raw := range msgs {
		var m struct {
			Role string `json:"role"`
		}
		json.Unmarshal(raw, &m)
		if m.Role == "assistant" {
			assistant = append(assistant, i)
		}
	}
	if len(assistant) != len(spans) {
		return nil, fmt.Errorf("the chat template rendered %d assistant turns for %d assistant messages", len(spans), len(assistant))
	}
	out := &Sequence{}
	pos := 0
	appendText := func(s string) {
		for _, id := range c.Tok.Encode(s, false) {
			out.Tokens = append(out.Tokens, id)
			out.Sampled = append(out.Sampled, false)
			out.OldLogp = append(out.OldLogp, math.NaN())
		}
	}
	for k, mi := range assistant {
		ch := chosen[mi]
		if ch == nil {
			continue // context, rendered as text
		}
		m := readAssistant(ch.Message)
		sp := spans[k]
		turn := text[sp.Start:sp.End]
		body := turn[:len(turn)-sp.Tail]
		if len(m.calls) > 0 && !rendersCalls(body, m.calls) {
			return nil, fmt.Errorf("messages_and_choices[%d]: the model's chat template does not render tool calls (%s is not in the assistant turn it renders)", mi, m.calls[0])
		}
		// What the sampled text may be: the content, or for a tool-call choice the body
		// (the calls as the template writes them, which a model trained on the template
		// samples).
		texts := []string{m.content, body}
		if len(m.calls) > 0 || m.content == "" {
			texts = []string{body, m.content}
		}
		ids, lps, known, err := c.sampledTokens(ch, texts, allowNoLogprobs)
		if err != nil {
			return nil, fmt.Errorf("messages_and_choices[%d]: %v", mi, err)
		}
		ids, lps, known = c.sampledTurnEnd(ch, turn[len(body):], ids, lps, known)
		var gen []byte
		for _, id := range ids {
			gen = append(gen, c.Tok.TokenBytes(id)...)
		}
		// Where the sampled text lies in the turn: [j, j+len(gen)); the rest of the turn
		// after it (from rest) is context.
		j, rest := placeSampled(turn, len(body), string(gen))
		appendText(text[pos : sp.Start+j])
		for i, id := range ids {
			out.Tokens = append(out.Tokens, id)
			out.Sampled = append(out.Sampled, known[i])
			out.OldLogp = append(out.OldLogp, lps[i])
			if !known[i] {
				out.Unknown++
			}
		}
		pos = sp.Start + rest
	}
	appendText(text[pos:])
	return out, nil
}

// sampledTurnEnd adds the token that closes the turn to a choice's sampled tokens when the
// choice ended on it but does not say so: a choice that finished with "stop" (or
// "tool_calls") on an end-of-sequence token (no stop_reason) sampled the end-of-turn token the template writes
// after its body (tail's first token, when special), and a choice without logprobs, or whose
// client left that token out of them, ends with a token that is not special. The token is
// trained as sampled (its sampling logprob unknown), so that RL, like SFT, teaches the turn's
// end.
func (c *ChatTokenizer) sampledTurnEnd(ch *choice, tail string, ids []int, lps []float64, known []bool) ([]int, []float64, []bool) {
	stopped := ch.FinishReason == "stop" || ch.FinishReason == "tool_calls" // vLLM's tool_calls: stopped, calls parsed
	if !stopped || (len(ch.StopReason) > 0 && string(ch.StopReason) != "null") || tail == "" {
		return ids, lps, known
	}
	if len(ids) > 0 && c.Tok.IsSpecial(ids[len(ids)-1]) {
		return ids, lps, known
	}
	end := c.Tok.Encode(tail, false)
	if len(end) == 0 || !c.Tok.IsSpecial(end[0]) {
		return ids, lps, known
	}
	return append(ids, end[0]), append(lps, math.NaN()), append(known, true)
}

// placeSampled finds where a choice's sampled text gen lies in its rendered turn (whose body
// is turn[:bodyLen], the rest being the end-of-turn text): the body's end (the text before it
// — a think block the template adds — is context), or the body and part of the end-of-turn
// text (a sampled stop token), or anywhere in the turn; else gen replaces the body. It
// returns where gen starts and where the context after it resumes.
func placeSampled(turn string, bodyLen int, gen string) (start, rest int) {
	if gen == "" {
		return bodyLen, bodyLen
	}
	for end := bodyLen; end <= len(turn); end++ {
		if strings.HasSuffix(turn[:end], gen) {
			return end - len(gen), end
		}
	}
	if j := strings.Index(turn, gen); j >= 0 {
		return j, j + len(gen)
	}
	// Replaced: skip the part of the end-of-turn text that gen already ends with.
	tail := turn[bodyLen:]
	for n := len(tail); n > 0; n-- {
		if strings.HasSuffix(gen, tail[:n]) {
			return 0, bodyLen + n
		}
	}
	return 0, bodyLen
}

// Trainable says whether the group's rewards differ (else every advantage in it is zero and
// the group teaches nothing).
func (g TrajectoryGroup) Trainable() bool {
	for _, t := range g.Trajectories {
		if t.Reward != g.Trajectories[0].Reward {
			return true
		}
	}
	return false
}

// Trainable says whether some group's rewards differ.
func Trainable(groups []TrajectoryGroup) bool {
	return slices.ContainsFunc(groups, TrajectoryGroup.Trainable)
}

// CheckGroups tokenises every trajectory (and additional history) that an RL step on groups
// would train — those of groups whose rewards differ — as train.RLStep does, so that a job is
// refused when it is created rather than failing when it runs: ids that cannot be recovered
// from a choice's logprobs, a choice without logprobs, a template that cannot render a turn.
// The error names the trajectory (trajectory_groups[g].trajectories[t], and
// .additional_histories[h]) and the choice.
func (c *ChatTokenizer) CheckGroups(groups []TrajectoryGroup, allowNoLogprobs bool) error {
	for gi, g := range groups {
		if !g.Trainable() {
			continue
		}
		for ti, t := range g.Trajectories {
			for hi, h := range t.Histories() {
				if _, err := c.TokenizeTrajectory(h.MessagesAndChoices, h.Tools, allowNoLogprobs); err != nil {
					where := fmt.Sprintf("trajectory_groups[%d].trajectories[%d]", gi, ti)
					if hi > 0 {
						where += fmt.Sprintf(".additional_histories[%d]", hi-1)
					}
					return &FieldError{Field: where, Msg: err.Error()}
				}
			}
		}
	}
	return nil
}
