package trainingdata

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// A sampled choice carries its token ids when the client asked for them (vLLM's
// return_token_ids); a plain OpenAI client asks only for logprobs, and its choices carry one
// logprobs entry per sampled token. The ids are recovered from those entries, never by
// tokenising the reply's text again (which can split it differently from what was sampled):
//
//   - "token_id:<n>" (vLLM's return_tokens_as_token_ids) is the id itself;
//   - otherwise the entry's bytes, or its token string, are looked up among the tokens'
//     bytes, then among the vocabulary's token strings (a byte-level BPE surface form such as
//     "Ġword");
//   - a token that is not valid UTF-8 on its own (part of a character) is written by vLLM,
//     and by Hone, as U+FFFD with the bytes of U+FFFD: the entry no longer says which token
//     it was. Such tokens are matched against the reply's text: where the text shows the
//     character they form, the ids that spell it are found (unique in practice); where the
//     text shows U+FFFD too, or the match is ambiguous, the token cannot be known. It is
//     then kept as context (with an id whose text is the same) and not trained on.

const replacement = "\uFFFD"

// sampledTokens returns the ids and sampling logprobs of a choice's sampled tokens, and
// which of them are known to be the sampled ids (the others are context only). texts are
// what the sampled text may be, most likely first (the content; for a tool-call choice the
// turn as the template renders it): lossy logprobs entries are matched against the first
// that they spell, and a choice without logprobs (when allowed) is the first tokenised.
func (c *ChatTokenizer) sampledTokens(ch *choice, texts []string, allowNoLogprobs bool) (ids []int, lps []float64, known []bool, err error) {
	vocab := max(c.Vocab, c.Tok.VocabSize())
	var entries []lpEntry
	if ch.Logprobs != nil {
		entries = ch.Logprobs.Content
	}
	for _, e := range entries {
		lps = append(lps, e.Logprob)
	}
	switch {
	case len(ch.TokenIDs) > 0:
		for i, id := range ch.TokenIDs {
			if id < 0 || id >= vocab {
				return nil, nil, nil, fmt.Errorf("token_ids[%d] = %d is not a token of the model (vocabulary of %d)", i, id, vocab)
			}
		}
		ids = ch.TokenIDs
		if lps != nil && len(lps) != len(ids) {
			return nil, nil, nil, fmt.Errorf("the choice has %d logprobs for %d token_ids", len(lps), len(ids))
		}
	case len(entries) > 0:
		ids, known, err = c.idsFromLogprobs(entries, texts...)
		if err != nil {
			return nil, nil, nil, err
		}
	case !allowNoLogprobs:
		return nil, nil, nil, errors.New("the choice has no logprobs; sample with logprobs=true or set allow_training_without_logprobs")
	default:
		ids = c.Tok.Encode(texts[0], false)
	}
	if lps == nil {
		lps = make([]float64, len(ids))
		for i := range lps {
			lps[i] = math.NaN()
		}
	}
	if known == nil {
		known = make([]bool, len(ids))
		for i := range known {
			known[i] = true
		}
	}
	return ids, lps, known, nil
}

// piece is what one logprobs entry says about its token: its id, or (id < 0) the text it
// decodes to, which holds U+FFFD (or is empty).
type piece struct {
	id    int
	lossy string
}

// idsFromLogprobs recovers the sampled ids of logprobs entries (see the comment at the top of
// this file), matching lossy entries against the first of texts that they spell.
func (c *ChatTokenizer) idsFromLogprobs(entries []lpEntry, texts ...string) ([]int, []bool, error) {
	vocab := max(c.Vocab, c.Tok.VocabSize())
	ps := make([]piece, len(entries))
	lossy := false
	for i, e := range entries {
		p, err := c.entryPiece(e, vocab)
		if err != nil {
			return nil, nil, fmt.Errorf("logprobs.content[%d]: %v", i, err)
		}
		ps[i] = p
		lossy = lossy || p.id < 0
	}
	ids := make([]int, len(ps))
	known := make([]bool, len(ps))
	if !lossy {
		for i, p := range ps {
			ids[i], known[i] = p.id, true
		}
		return ids, known, nil
	}
	for _, t := range texts {
		if c.alignLossy(ps, []byte(t), ids, known) {
			return ids, known, nil
		}
	}
	// No text is the sampled text (tool calls or reasoning taken out of it): the known
	// pieces stand, the lossy ones cannot be told.
	idx := c.indexes()
	for i, pc := range ps {
		ids[i], known[i] = pc.id, pc.id >= 0
		if pc.id < 0 {
			ids[i] = idx.byLossy[pc.lossy][0]
		}
	}
	return ids, known, nil
}

// entryPiece reads one logprobs entry.
func (c *ChatTokenizer) entryPiece(e lpEntry, vocab int) (piece, error) {
	if n, ok := strings.CutPrefix(e.Token, "token_id:"); ok {
		id, err := strconv.Atoi(n)
		if err != nil || id < 0 || id >= vocab {
			return piece{}, fmt.Errorf("token %q is not a valid token id (vocabulary of %d)", e.Token, vocab)
		}
		return piece{id: id}, nil
	}
	idx := c.indexes()
	if len(e.Bytes) > 0 {
		b := make([]byte, len(e.Bytes))
		for i, v := range e.Bytes {
			if v < 0 || v > 255 {
				return piece{}, fmt.Errorf("bytes holds %d, not a byte", v)
			}
			b[i] = byte(v)
		}
		// Bytes written from a string in which U+FFFD replaced part of a character (vLLM's
		// errors="replace") say nothing more than the string.
		if !(bytes.Equal(b, []byte(e.Token)) && strings.Contains(e.Token, replacement)) {
			if id, ok := idx.byBytes[string(b)]; ok {
				return piece{id: id}, nil
			}
		}
	}
	// A token written as U+FFFD, or as "" (an id past the tokenizer's vocabulary, a padding
	// row of the model's), does not say which it was.
	unsaid := e.Token == "" || strings.Contains(e.Token, replacement)
	if id, ok := idx.byBytes[e.Token]; ok && !unsaid {
		return piece{id: id}, nil
	}
	if id, ok := c.Tok.TokenID(e.Token); ok && id < vocab && e.Token != "" {
		return piece{id: id}, nil
	}
	if unsaid {
		if len(idx.byLossy[e.Token]) == 0 {
			return piece{}, fmt.Errorf("no token of the model decodes to %q", e.Token)
		}
		return piece{id: -1, lossy: e.Token}, nil
	}
	return piece{}, fmt.Errorf("token %q is not a token of the model", e.Token)
}

// tokenIndexes are the lookups of idsFromLogprobs, built once per ChatTokenizer.
type tokenIndexes struct {
	byBytes map[string]int   // a token's bytes → its id (the lowest when several share them)
	byLossy map[string][]int // the text of a token that is not valid UTF-8 alone, or "" → its ids
}

func (c *ChatTokenizer) indexes() *tokenIndexes {
	c.once.Do(func() {
		n := c.Tok.VocabSize()
		idx := &tokenIndexes{byBytes: make(map[string]int, n), byLossy: map[string][]int{}}
		for id := n - 1; id >= 0; id-- {
			idx.byBytes[string(c.Tok.TokenBytes(id))] = id
		}
		for id := 0; id < max(n, c.Vocab); id++ {
			if s := c.Tok.Decode([]int{id}, false); s == "" || strings.Contains(s, replacement) {
				idx.byLossy[s] = append(idx.byLossy[s], id)
			}
		}
		c.idx = idx
	})
	return c.idx
}

// edge is one way to read entry i at a byte position of the reply: as token id (id < 0: an
// unknown token whose text is the entry's), ending at position to.
type edge struct {
	id, to int
}

// alignLossy fills ids and known for pieces some of which are lossy, by matching the pieces
// against the reply's text (see the comment at the top of this file), and says whether they
// spell it. Known pieces keep their ids whatever the text says.
func (c *ChatTokenizer) alignLossy(ps []piece, text []byte, ids []int, known []bool) bool {
	idx := c.indexes()
	n, end := len(ps), len(text)
	// edges[i][p]: the ways entry i can be read starting at position p.
	edgesAt := func(i, p int) []edge {
		pc := ps[i]
		if p == end {
			// Past the text (a stop string cut it, or it is not the sampled text): anything.
			if pc.id >= 0 {
				return []edge{{pc.id, end}}
			}
			return []edge{{-1, end}}
		}
		match := func(b []byte) int {
			switch {
			case bytes.HasPrefix(text[p:], b):
				return p + len(b)
			case bytes.HasPrefix(b, text[p:]):
				return end
			}
			return -1
		}
		if pc.id >= 0 {
			if to := match(c.Tok.TokenBytes(pc.id)); to >= 0 {
				return []edge{{pc.id, to}}
			}
			return nil
		}
		var out []edge
		for _, id := range idx.byLossy[pc.lossy] {
			if to := match(c.Tok.TokenBytes(id)); to >= 0 {
				out = append(out, edge{id, to})
			}
		}
		// The text shows the replacement too: the token's bytes were not part of a character.
		// A U+FFFD of the text may stand for the bytes of several tokens.
		if bytes.HasPrefix(text[p:], []byte(pc.lossy)) {
			out = append(out, edge{-1, p + len(pc.lossy)})
		}
		if rest, ok := strings.CutPrefix(pc.lossy, replacement); ok && p >= len(replacement) && string(text[p-len(replacement):p]) == replacement && bytes.HasPrefix(text[p:], []byte(rest)) {
			out = append(out, edge{-1, p + len(rest)})
		}
		return out
	}
	// Forward: the positions reachable before each entry.
	reach := make([]map[int]bool, n+1)
	reach[0] = map[int]bool{0: true}
	for i := 0; i < n; i++ {
		reach[i+1] = map[int]bool{}
		for p := range reach[i] {
			for _, e := range edgesAt(i, p) {
				reach[i+1][e.to] = true
			}
		}
	}
	if !reach[n][end] {
		return false
	}
	// Backward: the positions from which the rest reads to the end.
	live := make([]map[int]bool, n+1)
	live[n] = map[int]bool{end: true}
	for i := n - 1; i >= 0; i-- {
		live[i] = map[int]bool{}
		for p := range reach[i] {
			for _, e := range edgesAt(i, p) {
				if live[i+1][e.to] {
					live[i][p] = true
				}
			}
		}
	}
	// An entry is known when every complete reading gives it the same id; one reading
	// (preferring known ids) provides the ids of the others.
	for i, pc := range ps {
		if pc.id >= 0 {
			ids[i], known[i] = pc.id, true
			continue
		}
		seen := map[int]bool{}
		for p := range reach[i] {
			if !live[i][p] {
				continue
			}
			for _, e := range edgesAt(i, p) {
				if live[i+1][e.to] {
					seen[e.id] = true
				}
			}
		}
		if len(seen) == 1 {
			for id := range seen {
				known[i] = id >= 0
			}
		}
	}
	p := 0
	for i := range ps {
		var pick *edge
		for _, e := range edgesAt(i, p) {
			if live[i+1][e.to] && (pick == nil || (pick.id < 0 && e.id >= 0)) {
				pick = &e
			}
		}
		ids[i], p = pick.id, pick.to
		if ids[i] < 0 {
			ids[i] = idx.byLossy[ps[i].lossy][0]
		}
	}
	return true
}
