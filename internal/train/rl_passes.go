package train

import (
	"context"
	"math"
	"slices"
)

// rlPassRows is the most rows an RL step's pass holds when it packs several sequences (a
// longer sequence runs alone), and at most the model's positions: the activations the
// backward pass keeps take about 1 MB a row on the SmolLM2-135M shape in f32, as much as an
// SFT batch of the same length.
var rlPassRows = 1024

// rlMinShared is the fewest tokens sequences must share at their start to run them once.
const rlMinShared = 16

// rlSharePrefixes turns the sharing of prompts on (tests compare it with passes without).
var rlSharePrefixes = true

// rlMember is one trajectory sequence in a pass: its tokens [skip, end) are the pass's rows
// [off, off+end−skip); its first skip tokens are the pass's prefix rows (skip 0: none); the
// tokens from end on, after its last sampled token, are left out: the rows that predict the
// sampled tokens come before them and do not depend on them.
type rlMember struct {
	s              *rlSeq
	off, skip, end int
}

// rlPass is one forward and backward pass of an RL step: sequences packed one after
// another, those that start with the same prompt continuing one copy of it (Seq.Prefix).
type rlPass struct {
	seq     Seq
	members []rlMember
}

// view returns the member's rows of the pass's statistics in its own positions (those the
// prefix holds read 0; they predict no sampled token).
func (mb rlMember) view(st TokenStats) TokenStats {
	if st.Logp == nil {
		return st
	}
	n := len(mb.s.seq.Tokens)
	out := TokenStats{Logp: make([]float32, n), Entropy: make([]float32, n)}
	copy(out.Logp[mb.skip:mb.end], st.Logp[mb.off:])
	copy(out.Entropy[mb.skip:mb.end], st.Entropy[mb.off:])
	return out
}

// sampledCount is the number of the sequence's sampled (trained) positions.
func (s *rlSeq) sampledCount() int {
	n := 0
	for _, sm := range s.sampled {
		if sm {
			n++
		}
	}
	return n
}

// firstNeeded is the first position whose prediction is a sampled token (len−1 when none).
func (s *rlSeq) firstNeeded() int {
	for t := 0; t+1 < len(s.sampled); t++ {
		if s.sampled[t+1] {
			return t
		}
	}
	return len(s.sampled) - 1
}

// neededEnd is one past the last sampled token (at least 1): the tokens a pass needs, the
// last sampled one being the target of the position before it.
func (s *rlSeq) neededEnd() int {
	for t := len(s.sampled) - 1; t > 0; t-- {
		if s.sampled[t] {
			return t + 1
		}
	}
	return 1
}

// planRLPasses packs the sequences into passes of at most rows rows (a longer sequence alone).
// With share, sequences that start with the same tokens (at least rlMinShared, up to the
// first position that predicts a sampled token) hold them once, as a prefix the others
// continue: a trajectory group's prompt runs once for all its samples.
func planRLPasses(seqs []*rlSeq, share bool, rows int) []rlPass {
	type unit struct {
		prefix  int // shared tokens (0: none)
		members []*rlSeq
	}
	var units []unit
	if !share {
		for _, s := range seqs {
			units = append(units, unit{members: []*rlSeq{s}})
		}
	} else {
		order := slices.Clone(seqs)
		slices.SortStableFunc(order, func(a, b *rlSeq) int { return slices.Compare(a.seq.Tokens, b.seq.Tokens) })
		for i := 0; i < len(order); {
			// Extend the run while the rows it saves do not go down: k sequences sharing L
			// tokens save (k−1)·L rows.
			L := order[i].firstNeeded()
			j := i + 1
			for ; j < len(order); j++ {
				l := min(L, commonPrefix(order[i].seq.Tokens, order[j].seq.Tokens), order[j].firstNeeded())
				if l < rlMinShared || (j-i)*l < (j-i-1)*L {
					break
				}
				L = l
			}
			if j-i == 1 {
				L = 0
			}
			units = append(units, unit{prefix: L, members: order[i:j]})
			i = j
		}
	}
	var passes []rlPass
	var cur *rlPass
	for _, u := range units {
		var prefix []int
		if u.prefix > 0 {
			prefix = u.members[0].seq.Tokens[:u.prefix]
		}
		pi := -1 // the prefix's segment in the current pass
		for _, s := range u.members {
			end := max(s.neededEnd(), u.prefix+2)
			n := end - u.prefix
			if prefix != nil && pi < 0 {
				n += u.prefix
			}
			if cur == nil || len(cur.seq.Tokens) > 0 && len(cur.seq.Tokens)+n > rows {
				passes = append(passes, rlPass{})
				cur, pi = &passes[len(passes)-1], -1
			}
			if prefix != nil && pi < 0 {
				pi = cur.segment(prefix, make([]bool, len(prefix)), -1)
			}
			// Targets: token t+1 is predicted at position t; the head computes sampled
			// ones only.
			need := make([]bool, end-u.prefix)
			for t := range need {
				need[t] = u.prefix+t+1 < end && s.sampled[u.prefix+t+1]
			}
			cur.members = append(cur.members, rlMember{s: s, off: len(cur.seq.Tokens), skip: u.prefix, end: end})
			cur.segment(s.seq.Tokens[u.prefix:end], need, pi)
		}
	}
	// A pass without prefixes runs as a plain packed sequence.
	for i := range passes {
		if !slices.ContainsFunc(passes[i].members, func(mb rlMember) bool { return mb.skip > 0 }) {
			passes[i].seq.Prefix = nil
		}
	}
	return passes
}

// segment appends a segment of tokens that continues the prefix segment pi (−1: none) and
// returns its index.
func (p *rlPass) segment(tokens []int, need []bool, pi int) int {
	p.seq.Segments = append(p.seq.Segments, len(p.seq.Tokens))
	p.seq.Prefix = append(p.seq.Prefix, pi)
	p.seq.Tokens = append(p.seq.Tokens, tokens...)
	p.seq.Need = append(p.seq.Need, need...)
	return len(p.seq.Segments) - 1
}

func commonPrefix(a, b []int) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// rlPasses runs the forward and backward passes of an RL step over its tokenised sequences
// (their advantages scaled, w the token weight of each trajectory, rlWeights): the gradients
// of the loss accumulate into e.G (zeroed first), and the loss, the token counts and the
// metrics' sums go into met. The sequences run packed, several to a pass, and a prompt that
// several start with runs once (planRLPasses). It returns the number of the sequences' tokens.
func (e *Trainer) rlPasses(ctx context.Context, seqs []*rlSeq, cfg *RLConfig, w map[int]float64, met *RLMetrics) (int, error) {
	e.G.Zero()
	tokens := 0
	var trained []*rlSeq
	for _, s := range seqs {
		n := s.sampledCount()
		if n == 0 {
			continue
		}
		met.NumTrainableTokens += n
		tokens += len(s.seq.Tokens)
		trained = append(trained, s)
	}
	entSum, klSum, klRefSum := 0.0, 0.0, 0.0
	for _, p := range planRLPasses(trained, rlSharePrefixes && !e.M.NeedsRopeContext(), min(rlPassRows, e.M.Rope.Len())) {
		if err := ctx.Err(); err != nil {
			return tokens, err
		}
		// The sampling logprob of each member's positions (NaN: unknown).
		olds := make([][]float64, len(p.members))
		needOld := false
		for i, mb := range p.members {
			s := mb.s
			old := make([]float64, len(s.seq.Tokens))
			for t := 0; t+1 < len(s.seq.Tokens); t++ {
				old[t] = s.oldLogp[t+1]
				if s.sampled[t+1] && math.IsNaN(old[t]) {
					needOld = true
				}
			}
			olds[i] = old
		}
		var ref TokenStats
		if cfg.KLPenaltyCoef > 0 {
			ref = e.Logprobs(p.seq, cfg.RefAdapter)
		}
		if needOld {
			cur := e.Logprobs(p.seq, e.A) // on-policy: the ratio is 1
			for i, mb := range p.members {
				lp := mb.view(cur).Logp
				for t, v := range olds[i] {
					if math.IsNaN(v) {
						olds[i][t] = float64(lp[t])
					}
				}
			}
		}
		e.ForwardBackward(p.seq, func(st TokenStats) []float32 {
			g := make([]float32, len(p.seq.Tokens))
			for i, mb := range p.members {
				var l rlLoss
				met.Loss += l.compute(cfg, mb.s, mb.view(st), olds[i], mb.view(ref), w[mb.s.traj])
				entSum += l.entropy
				klSum += l.k3
				klRefSum += l.klRef
				copy(g[mb.off:], l.g[mb.skip:mb.end])
			}
			return g
		})
	}
	met.Entropy, met.KLDiv, met.KLPolicyRef = entSum, klSum, klRefSum
	return tokens, nil
}
