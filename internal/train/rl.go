package train

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/honeai/hone/internal/model"
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

// RLConfig is ART's ExperimentalTrainingConfig as far as Hone implements it.
type RLConfig struct {
	LearningRate         float64 // default 5e-6
	Loss                 string  // "cispo" (default) or "ppo"
	Epsilon, EpsilonHigh float64 // clip bounds (defaults: ppo 0.2/0.2, cispo 1.0/4.0)
	ScaleRewards         bool    // divide advantages by the group's standard deviation
	// AdvantageBalance in [-1, 1]: > 0 scales negative advantages by 1−b, < 0 positive ones
	// by 1+b (1: train on positive advantages only, −1: on negative ones only).
	AdvantageBalance float64
	// ImportanceSampling: "token" (default), "sequence" (exp of the trajectory's mean
	// log-ratio), "average" (their mean) or "geometric_average" (their geometric mean).
	ImportanceSampling string
	// MaskProbRatio zeroes ratios outside (1−ε, 1+ε_high) instead of clipping them.
	MaskProbRatio bool
	// KimiK2Tau > 0: each token's advantage becomes A − τ·(logπ − logπ_old) (not
	// differentiated).
	KimiK2Tau float64
	// TruncatedIS > 0: each token's loss is multiplied by min(ratio, TruncatedIS) (not
	// differentiated).
	TruncatedIS float64
	// KLPenaltyCoef > 0 (with RefAdapter): ART's KL penalty as an advantage adjustment: with
	// kl = logπ − logπ_ref per sampled token, A += coef·(mean(kl) − kl) over the trajectory.
	KLPenaltyCoef float64
	RefAdapter    *model.LoRA `json:"-"`
	// KLPenaltySource is whose logprobs the KL penalty compares with the reference's:
	// "current_learner" (default, logπ) or "sample" (the sampling logprobs).
	KLPenaltySource string
	// NumTrajectoriesLRPower: the learning rate is multiplied by N^power, N the number of
	// trajectories trained on (ART's num_trajectories_learning_rate_multiplier_power).
	NumTrajectoriesLRPower float64
	// LRMultiplier multiplies the learning rate (0: 1), as the job's
	// scale_learning_rate_by_reward_std_dev decides.
	LRMultiplier         float64
	AllowWithoutLogprobs bool // trajectories without sampling logprobs: Hone computes them
	MaxGradNorm          float64
	WeightDecay          float64
	MaxSeqLen            int
	// MaxNegativeAdvantageIS > 0 caps the ratio of negative-advantage tokens.
	MaxNegativeAdvantageIS float64
}

// RLMetrics are the metrics of one RL step (the keys ART maps).
type RLMetrics struct {
	Reward             float64 `json:"reward"`
	RewardStdDev       float64 `json:"reward_std_dev"`
	Loss               float64 `json:"loss"`
	Entropy            float64 `json:"entropy"`
	KLDiv              float64 `json:"kl_div"`        // mean k3 estimate of KL(new‖ref) (0 without a reference)
	KLPolicyRef        float64 `json:"kl_policy_ref"` // mean logπ − logπ_ref over sampled tokens
	GradNorm           float64 `json:"grad_norm"`
	LearningRate       float64 `json:"learning_rate"`
	NumGroupsSubmitted int     `json:"num_groups_submitted"`
	NumGroupsTrainable int     `json:"num_groups_trainable"`
	NumTrajectories    int     `json:"num_trajectories"`
	NumTrainableTokens int     `json:"num_trainable_tokens"`
	// NumUnknownTokens counts sampled tokens whose ids the choices did not say (trained
	// as context only; see logprobs.go).
	NumUnknownTokens int     `json:"num_unknown_tokens,omitempty"`
	TokensPerSecond  float64 `json:"tokens_per_second"`
}

// ErrNothingToTrain is returned when every group's advantages are zero.
var ErrNothingToTrain = errors.New("no trajectory group has rewards that differ, so there is nothing to train on (every advantage is zero)")

// rlSeq is one tokenised trajectory conversation with its sampled tokens.
type rlSeq struct {
	seq       Seq
	sampled   []bool    // per token: sampled by the policy (trained)
	oldLogp   []float64 // per token: sampling logprob (NaN: unknown)
	advantage float64
	unknown   int // sampled tokens whose ids the choice did not say (context only)
	traj      int // the trajectory it belongs to (its histories share it)
}

func (c *RLConfig) defaults() error {
	if c.LearningRate == 0 {
		c.LearningRate = DefaultRLLearningRate
	}
	switch c.Loss {
	case "", "cispo":
		c.Loss = "cispo"
		if c.Epsilon == 0 {
			c.Epsilon = 1
		}
		if c.EpsilonHigh == 0 {
			c.EpsilonHigh = 4
		}
	case "ppo":
		if c.Epsilon == 0 {
			c.Epsilon = 0.2
		}
		if c.EpsilonHigh == 0 {
			c.EpsilonHigh = c.Epsilon
		}
	default:
		return fmt.Errorf("loss_fn %q is not supported (cispo or ppo)", c.Loss)
	}
	switch c.ImportanceSampling {
	case "":
		c.ImportanceSampling = "token"
	case "token", "sequence", "average", "geometric_average":
	default:
		return fmt.Errorf("importance_sampling_level %q is not supported (token, sequence, average or geometric_average)", c.ImportanceSampling)
	}
	if c.AdvantageBalance < -1 || c.AdvantageBalance > 1 {
		return fmt.Errorf("advantage_balance must be in [-1, 1], got %v", c.AdvantageBalance)
	}
	if c.Epsilon < 0 || c.EpsilonHigh < 0 {
		return errors.New("epsilon and epsilon_high must not be negative")
	}
	if c.KimiK2Tau < 0 || c.TruncatedIS < 0 || c.KLPenaltyCoef < 0 || c.MaxNegativeAdvantageIS < 0 {
		return errors.New("kimi_k2_tau, truncated_importance_sampling, kl_penalty_coef and max_negative_advantage_importance_sampling_weight must not be negative")
	}
	if c.MaxGradNorm == 0 {
		c.MaxGradNorm = 1
	}
	if c.MaxSeqLen == 0 {
		c.MaxSeqLen = 4096
	}
	if c.KLPenaltyCoef > 0 && c.RefAdapter == nil {
		return errors.New("kl_penalty_coef needs a reference checkpoint")
	}
	switch c.KLPenaltySource {
	case "":
		c.KLPenaltySource = "current_learner"
	case "current_learner", "sample":
	default:
		return fmt.Errorf("kl_penalty_source %q is not supported (current_learner or sample)", c.KLPenaltySource)
	}
	if c.LRMultiplier == 0 {
		c.LRMultiplier = 1
	}
	if c.LRMultiplier < 0 || math.IsNaN(c.NumTrajectoriesLRPower) || math.IsInf(c.NumTrajectoriesLRPower, 0) {
		return errors.New("the learning-rate multipliers must be finite and not negative")
	}
	return nil
}

// tokenizeTrajectory turns one conversation of ART's messages_and_choices into tokens,
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
func (c *ChatTokenizer) tokenizeTrajectory(items []json.RawMessage, tools json.RawMessage, allowNoLogprobs bool) (*rlSeq, error) {
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
	out := &rlSeq{}
	pos := 0
	appendText := func(s string) {
		for _, id := range c.Tok.Encode(s, false) {
			out.seq.Tokens = append(out.seq.Tokens, id)
			out.sampled = append(out.sampled, false)
			out.oldLogp = append(out.oldLogp, math.NaN())
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
			out.seq.Tokens = append(out.seq.Tokens, id)
			out.sampled = append(out.sampled, known[i])
			out.oldLogp = append(out.oldLogp, lps[i])
			if !known[i] {
				out.unknown++
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

// assistantMsg is what tokenizeTrajectory reads of a choice's message.
type assistantMsg struct {
	content string
	calls   []string // the tool calls' function names
}

func readAssistant(raw json.RawMessage) assistantMsg {
	var m struct {
		Content   any `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	json.Unmarshal(raw, &m)
	var out assistantMsg
	out.content, _ = m.Content.(string)
	for _, tc := range m.ToolCalls {
		if tc.Function.Name != "" {
			out.calls = append(out.calls, tc.Function.Name)
		}
	}
	return out
}

// rendersCalls says whether a rendered assistant turn shows every tool call (by name).
func rendersCalls(turn string, names []string) bool {
	for _, n := range names {
		if !strings.Contains(turn, n) {
			return false
		}
	}
	return true
}

// templateMessages is the messages as the template gets them: an assistant message whose
// content is null (an OpenAI tool-call message) gets the empty string, as vLLM gives
// templates such a message, so that templates which add to or search the content
// (SmolLM2's, Qwen3's) render it.
func templateMessages(msgs []json.RawMessage) ([]byte, error) {
	out := make([]json.RawMessage, len(msgs))
	for i, raw := range msgs {
		out[i] = raw
		var m map[string]json.RawMessage
		if json.Unmarshal(raw, &m) != nil || string(m["role"]) != `"assistant"` {
			continue
		}
		if c, ok := m["content"]; ok && string(c) != "null" {
			continue
		}
		// Keep the key order: insert "content" after the existing fields.
		b := bytes.TrimRight(raw, " \t\r\n")
		if len(b) < 2 || b[len(b)-1] != '}' {
			continue
		}
		if _, ok := m["content"]; ok {
			b = replaceNullContent(b)
		} else {
			sep := ","
			if len(m) == 0 {
				sep = ""
			}
			b = append(slices.Clone(b[:len(b)-1]), sep+`"content":""}`...)
		}
		out[i] = b
	}
	return json.Marshal(out)
}

// replaceNullContent rewrites an object's "content": null as "content": "", keeping the
// order of its keys.
func replaceNullContent(obj []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(obj))
	dec.Token() // {
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return obj
		}
		var v json.RawMessage
		before := dec.InputOffset()
		if err := dec.Decode(&v); err != nil {
			return obj
		}
		if k, _ := kt.(string); k == "content" && string(v) == "null" {
			after := dec.InputOffset()
			seg := obj[before:after]
			i := bytes.LastIndex(seg, []byte("null"))
			if i < 0 {
				return obj
			}
			out := slices.Clone(obj[:int(before)+i])
			out = append(out, `""`...)
			return append(out, obj[int(before)+i+4:]...)
		}
	}
	return obj
}

// RLStep runs one RL step (one ART training job) on groups: group-relative advantages, the
// configured loss over the sampled tokens, one optimizer update. It returns the metrics, or
// ErrNothingToTrain when no group has differing rewards.
func RLStep(ctx context.Context, e *Trainer, chat *ChatTokenizer, groups []TrajectoryGroup, cfg RLConfig, o *AdamW) (RLMetrics, *AdamW, error) {
	if err := cfg.defaults(); err != nil {
		return RLMetrics{}, o, err
	}
	if o == nil {
		o = NewAdamW(cfg.WeightDecay)
	}
	if chat.Vocab == 0 {
		chat.Vocab = e.M.Config.VocabSize
	}
	start := time.Now()
	met := RLMetrics{NumGroupsSubmitted: len(groups), LearningRate: cfg.LearningRate * cfg.LRMultiplier}
	trained := 0 // trajectories with an advantage
	var seqs []*rlSeq
	var rewards []float64
	stdSum := 0.0
	for gi, g := range groups {
		if len(g.Trajectories) == 0 {
			continue
		}
		rs := make([]float64, len(g.Trajectories))
		for ti, t := range g.Trajectories {
			rs[ti] = t.Reward
		}
		mean, std := meanStd(rs)
		rewards = append(rewards, rs...)
		stdSum += std
		trainable := false
		for ti, t := range g.Trajectories {
			adv := rs[ti] - mean
			if cfg.ScaleRewards {
				adv /= std + 1e-6
			}
			switch b := cfg.AdvantageBalance; {
			case b > 0 && adv < 0:
				adv *= 1 - b
			case b < 0 && adv > 0:
				adv *= 1 + b
			}
			if adv == 0 {
				continue
			}
			trainable = true
			trained++
			if err := t.Normalize(); err != nil {
				return met, o, fmt.Errorf("trajectory_groups[%d].trajectories[%d]: %v", gi, ti, err)
			}
			convs := []History{{MessagesAndChoices: t.MessagesAndChoices, Tools: t.Tools}}
			convs = append(convs, t.AdditionalHistories...)
			for hi, h := range convs {
				s, err := chat.tokenizeTrajectory(h.MessagesAndChoices, h.Tools, cfg.AllowWithoutLogprobs)
				if err != nil {
					where := fmt.Sprintf("trajectory_groups[%d].trajectories[%d]", gi, ti)
					if hi > 0 {
						where += fmt.Sprintf(".additional_histories[%d]", hi-1)
					}
					return met, o, fmt.Errorf("%s: %v", where, err)
				}
				if len(s.seq.Tokens) > cfg.MaxSeqLen {
					return met, o, fmt.Errorf("trajectory_groups[%d].trajectories[%d] has %d tokens, more than %d", gi, ti, len(s.seq.Tokens), cfg.MaxSeqLen)
				}
				s.advantage, s.traj = adv, trained-1
				met.NumUnknownTokens += s.unknown
				seqs = append(seqs, s)
			}
		}
		if trainable {
			met.NumGroupsTrainable++
		}
	}
	met.Reward, _ = meanStd(rewards)
	if len(groups) > 0 {
		met.RewardStdDev = stdSum / float64(len(groups))
	}
	if len(seqs) == 0 {
		return met, o, ErrNothingToTrain
	}
	met.NumTrajectories = len(seqs)
	w := rlWeights(seqs)
	lr := cfg.LearningRate * cfg.LRMultiplier
	if cfg.NumTrajectoriesLRPower != 0 {
		lr *= math.Pow(float64(trained), cfg.NumTrajectoriesLRPower)
	}
	met.LearningRate = lr
	e.G.Zero()
	tokens := 0
	entSum, klSum, klRefSum := 0.0, 0.0, 0.0
	for _, s := range seqs {
		if err := ctx.Err(); err != nil {
			return met, o, err
		}
		n := 0
		for _, sm := range s.sampled {
			if sm {
				n++
			}
		}
		if n == 0 {
			continue
		}
		met.NumTrainableTokens += n
		tokens += len(s.seq.Tokens)
		// Targets: token t+1 is predicted at position t; the head computes sampled ones only.
		old := make([]float64, len(s.seq.Tokens))
		s.seq.Need = make([]bool, len(s.seq.Tokens))
		for t := 0; t+1 < len(s.seq.Tokens); t++ {
			s.seq.Need[t] = s.sampled[t+1]
		}
		var ref TokenStats
		if cfg.KLPenaltyCoef > 0 {
			ref = e.Logprobs(s.seq, cfg.RefAdapter)
		}
		needOld := false
		for t := 0; t+1 < len(s.seq.Tokens); t++ {
			old[t] = s.oldLogp[t+1]
			if s.sampled[t+1] && math.IsNaN(old[t]) {
				needOld = true
			}
		}
		if needOld {
			cur := e.Logprobs(s.seq, e.A) // on-policy: the ratio is 1
			for t := range old {
				if math.IsNaN(old[t]) {
					old[t] = float64(cur.Logp[t])
				}
			}
		}
		var seqLoss float64
		e.ForwardBackward(s.seq, func(st TokenStats) []float32 {
			var l rlLoss
			seqLoss = l.compute(&cfg, s, st, old, ref, w[s.traj])
			entSum += l.entropy
			klSum += l.k3
			klRefSum += l.klRef
			return l.g
		})
		met.Loss += seqLoss
	}
	met.Entropy, met.KLDiv, met.KLPolicyRef = entSum, klSum, klRefSum
	met.GradNorm = e.G.Clip(cfg.MaxGradNorm)
	if err := checkGradStep(met.Loss, met.GradNorm); err != nil {
		return met, o, err
	}
	o.UpdateRates(e.A, e.G, lr, e.tokenLR(lr))
	if err := CheckFinite(e.A); err != nil {
		return met, o, fmt.Errorf("%w (after the update at learning rate %g)", err, lr)
	}
	met.TokensPerSecond = float64(tokens) / time.Since(start).Seconds()
	return met, o, nil
}

// rlWeights weights the sampled tokens and scales the advantages as ART's packing does
// (preprocessing/pack.py): every sampled token of a trajectory (over all its histories) weighs
// 1/n, n its sampled tokens, and the weights of the step average 1 over its tokens; then the
// advantages are divided by the mean of |A|·weight over those tokens. With the loss the sum of
// the weighted token losses over the step's tokens, a trajectory counts 1/T of the step (T
// trajectories with sampled tokens) and its advantage is A / mean over trajectories of |A|.
// It scales the seqs' advantages and answers each trajectory's token weight, 1/n/T.
func rlWeights(seqs []*rlSeq) map[int]float64 {
	tokens := map[int]int{} // trajectories with sampled tokens only
	adv := map[int]float64{}
	for _, s := range seqs {
		for _, sm := range s.sampled {
			if sm {
				tokens[s.traj]++
			}
		}
		adv[s.traj] = s.advantage
	}
	w := map[int]float64{}
	if len(tokens) == 0 {
		return w
	}
	sumAbs := 0.0
	for t, n := range tokens {
		sumAbs += math.Abs(adv[t])
		w[t] = 1 / float64(n) / float64(len(tokens))
	}
	meanAbs := sumAbs / float64(len(tokens))
	for _, s := range seqs {
		s.advantage /= meanAbs
	}
	return w
}

// rlLoss is the loss of one trajectory sequence and its gradient.
type rlLoss struct {
	g                  []float32 // dLoss/dlogp per position
	entropy, k3, klRef float64   // weighted sums of the metrics
}

// compute evaluates ART's loss for s given the current statistics st, the sampling logprobs
// old (per predicting position) and the reference's statistics ref (when the KL penalty is
// on), each sampled token weighted w; it fills l and returns the weighted loss.
//
// Per sampled token t with r_t = exp(logπ_t − old_t) and the trajectory's ratio
// R = exp(mean(logπ − old)), the ratio ρ_t is r_t, R, (r_t+R)/2 or √(r_t·R) by importance-
// sampling level, then capped (negative advantages), masked, and used by the loss: ppo
// −min(ρA, clip(ρ)A), cispo −clip(sg(ρ))·A·logπ. The gradient takes R's dependence on every
// token into account.
func (l *rlLoss) compute(cfg *RLConfig, s *rlSeq, st TokenStats, old []float64, ref TokenStats, w float64) float64 {
	T := len(s.seq.Tokens)
	l.g = make([]float32, T)
	var idx []int
	logR := 0.0
	for t := 0; t+1 < T; t++ {
		if s.sampled[t+1] {
			idx = append(idx, t)
			logR += float64(st.Logp[t]) - old[t]
		}
	}
	n := float64(len(idx))
	if n == 0 {
		return 0
	}
	R := math.Exp(logR / n)
	// The KL adjustment's mean over the trajectory.
	// kl of position t: logπ − logπ_ref, or old − logπ_ref with kl_penalty_source "sample"
	// (not differentiated either way).
	kl := func(t int) float64 {
		if cfg.KLPenaltySource == "sample" {
			return old[t] - float64(ref.Logp[t])
		}
		return float64(st.Logp[t] - ref.Logp[t])
	}
	klMean := 0.0
	if cfg.KLPenaltyCoef > 0 {
		for _, t := range idx {
			klMean += kl(t) / n
		}
		l.klRef = klMean * n * w
	}
	lo, hi := 1-cfg.Epsilon, 1+cfg.EpsilonHigh
	loss := 0.0
	sumR := 0.0 // Σ_t dL_t/dρ_t · ∂ρ_t/∂R, for R's share of every token's gradient
	own := make([]float64, len(idx))
	for i, t := range idx {
		lp := float64(st.Logp[t])
		diff := lp - old[t]
		r := math.Exp(diff)
		// ρ and its partial derivatives times r (own token) and times R (the trajectory).
		var rho, dOwn, dSeq float64
		switch cfg.ImportanceSampling {
		case "sequence":
			rho, dOwn, dSeq = R, 0, R
		case "average":
			rho, dOwn, dSeq = (r+R)/2, r/2, R/2
		case "geometric_average":
			rho = math.Sqrt(r * R)
			dOwn, dSeq = rho/2, rho/2
		default:
			rho, dOwn, dSeq = r, r, 0
		}
		A := s.advantage
		if cfg.MaxNegativeAdvantageIS > 0 && A < 0 && rho > cfg.MaxNegativeAdvantageIS {
			rho, dOwn, dSeq = cfg.MaxNegativeAdvantageIS, 0, 0
		}
		if cfg.MaskProbRatio && (rho <= lo || rho >= hi) {
			rho, dOwn, dSeq = 0, 0, 0
		}
		if cfg.KimiK2Tau > 0 {
			A -= cfg.KimiK2Tau * diff
		}
		if cfg.KLPenaltyCoef > 0 {
			A += cfg.KLPenaltyCoef * (klMean - kl(t))
		}
		clipped := math.Max(lo, math.Min(hi, rho))
		var lt, dRho, direct float64 // loss, dL/dρ, dL/dlogπ other than through ρ
		switch cfg.Loss {
		case "ppo":
			if un, cl := rho*A, clipped*A; un <= cl {
				lt, dRho = -un, -A
			} else {
				lt = -cl
				if rho > lo && rho < hi {
					dRho = -A
				}
			}
		default: // cispo
			lt, direct = -clipped*A*lp, -clipped*A
		}
		if cfg.TruncatedIS > 0 {
			c := math.Min(rho, cfg.TruncatedIS)
			lt, dRho, direct = lt*c, dRho*c, direct*c
		}
		loss += lt * w
		own[i] = dRho*dOwn + direct
		sumR += dRho * dSeq
		l.entropy += float64(st.Entropy[t]) * w
		if ref.Logp != nil {
			d := float64(ref.Logp[t]) - lp
			l.k3 += (math.Exp(d) - d - 1) * w
		}
	}
	for i, t := range idx {
		l.g[t] = float32((own[i] + sumR/n) * w)
	}
	return loss
}

// RewardStdDev is the mean over groups of their rewards' population standard deviation
// (ART's reward_std_dev).
func RewardStdDev(groups []TrajectoryGroup) float64 {
	if len(groups) == 0 {
		return 0
	}
	sum := 0.0
	for _, g := range groups {
		rs := make([]float64, len(g.Trajectories))
		for i, t := range g.Trajectories {
			rs[i] = t.Reward
		}
		_, std := meanStd(rs)
		sum += std
	}
	return sum / float64(len(groups))
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

// meanStd is the mean and population standard deviation.
func meanStd(x []float64) (float64, float64) {
	if len(x) == 0 {
		return 0, 0
	}
	m := 0.0
	for _, v := range x {
		m += v
	}
	m /= float64(len(x))
	s := 0.0
	for _, v := range x {
		s += (v - m) * (v - m)
	}
	return m, math.Sqrt(s / float64(len(x)))
}

// CheckGroups tokenises every trajectory (and additional history) that an RL step on groups
// would train — those of groups whose rewards differ — as RLStep does, so that a job is
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
			convs := []History{{MessagesAndChoices: t.MessagesAndChoices, Tools: t.Tools}}
			convs = append(convs, t.AdditionalHistories...)
			for hi, h := range convs {
				if _, err := c.tokenizeTrajectory(h.MessagesAndChoices, h.Tools, allowNoLogprobs); err != nil {
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
