package trace

import (
	"bytes"
	"math"
	"slices"
	"sort"
	"strconv"
)

// A call's usage counts (summary.usage as ExtractUsage reads it) are stored beside its summary
// in the column summary_usage when the end is written, so the usage roll-up reads a few bytes
// per call instead of parsing every summary. Rows written before the column existed hold NULL
// there, and their summary is parsed instead.
//
// The text is, per model in name order, `<len(model)>:<model> <requests> <prompt> <completion>
// <total> <cache read> <cache creation>;` (integers in decimal); "" when there is no usage.

// ModelCount is the usage counts of one model.
type ModelCount struct {
	Model string
	ModelUsage
}

// encodeUsage writes the summary_usage text of the usage read from summary.
func encodeUsage(summary []byte) string {
	if !bytes.Contains(summary, []byte(`"usage"`)) {
		return ""
	}
	if s, ok := encodeUsageFast(summary); ok {
		return s
	}
	return encodeUsageParsed(summary)
}

// encodeUsageParsed is encodeUsage through ExtractUsage, for any summary.
func encodeUsageParsed(summary []byte) string {
	u := ExtractUsage(summary)
	if len(u) == 0 {
		return ""
	}
	var b []byte
	for _, m := range sortedKeys(u) {
		c := u[m]
		b = strconv.AppendInt(b, int64(len(m)), 10)
		b = append(b, ':')
		b = append(b, m...)
		for _, n := range [...]int64{c.Requests, c.PromptTokens, c.CompletionTokens, c.TotalTokens, c.CacheRead, c.CacheCreation} {
			b = append(b, ' ')
			b = strconv.AppendInt(b, n, 10)
		}
		b = append(b, ';')
	}
	return string(b)
}

// decodeUsage reads summary_usage text; ok is false when it is malformed.
func decodeUsage(s []byte) ([]ModelCount, bool) { return decodeUsageInto(nil, s, nil) }

// decodeUsageInto appends the counts in summary_usage text to out; model names are shared
// through names when it is not nil.
func decodeUsageInto(out []ModelCount, s []byte, names map[string]string) ([]ModelCount, bool) {
	for len(s) > 0 {
		colon := bytes.IndexByte(s, ':')
		if colon < 0 {
			return nil, false
		}
		n, err := strconv.Atoi(string(s[:colon]))
		if err != nil || n < 0 || colon+1+n > len(s) {
			return nil, false
		}
		var mc ModelCount
		if name, ok := names[string(s[colon+1:colon+1+n])]; ok {
			mc.Model = name
		} else {
			mc.Model = string(s[colon+1 : colon+1+n])
			if names != nil && len(names) < 1024 {
				names[mc.Model] = mc.Model
			}
		}
		s = s[colon+1+n:]
		for _, p := range [...]*int64{&mc.Requests, &mc.PromptTokens, &mc.CompletionTokens, &mc.TotalTokens, &mc.CacheRead, &mc.CacheCreation} {
			if len(s) == 0 || s[0] != ' ' {
				return nil, false
			}
			s = s[1:]
			v, rest, ok := leadingInt(s)
			if !ok {
				return nil, false
			}
			*p, s = v, rest
		}
		if len(s) == 0 || s[0] != ';' {
			return nil, false
		}
		s = s[1:]
		out = append(out, mc)
	}
	return out, true
}

// leadingInt reads a decimal int64 (optionally negative) at the start of s.
func leadingInt(s []byte) (int64, []byte, bool) {
	i, neg := 0, false
	if len(s) > 0 && s[0] == '-' {
		neg, i = true, 1
	}
	start := i
	var v uint64
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		d := uint64(s[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, nil, false
		}
		v = v*10 + d
		i++
	}
	switch {
	case i == start, neg && v > 1<<63, !neg && v > math.MaxInt64:
		return 0, nil, false
	case neg:
		return -int64(v), s[i:], true
	}
	return int64(v), s[i:], true
}

// usageList is ExtractUsage's result as a list in model order.
func usageList(summary []byte) []ModelCount {
	u := ExtractUsage(summary)
	if len(u) == 0 {
		return nil
	}
	out := make([]ModelCount, 0, len(u))
	for m, c := range u {
		out = append(out, ModelCount{Model: m, ModelUsage: *c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Model < out[j].Model })
	return out
}

// encodeUsageFast is encodeUsage for the summaries ingest sees most, read in place without
// building a document: compact JSON text (as callValue stores it) without escapes, one
// "usage" key, no model or count named twice, counts that are integers. ok is false for any
// other summary, which encodeUsage then reads through ExtractUsage.
func encodeUsageFast(summary []byte) (string, bool) {
	const key = `"usage":`
	at := bytes.Index(summary, []byte(key))
	if at < 0 || bytes.IndexByte(summary, '\\') >= 0 || bytes.Contains(summary[at+len(key):], []byte(key)) {
		return "", false
	}
	// Without escapes, a string holds no quote: `"usage":` is a key; it must be the top
	// object's.
	depth := 0
	for i := 0; i < at; i++ {
		switch summary[i] {
		case '"':
			j := bytes.IndexByte(summary[i+1:], '"')
			if j < 0 {
				return "", false
			}
			i += j + 1
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		}
	}
	if depth != 1 {
		return "", false
	}
	s := summary[at+len(key):]
	if len(s) == 0 || s[0] != '{' {
		return "", true // not an object: no usage
	}
	type entry struct {
		model []byte
		u     ModelUsage
	}
	models := make([]entry, 0, 2)
	i := 1
	for i < len(s) && s[i] != '}' {
		if s[i] == ',' {
			i++
		}
		name, next, ok := fastKey(s, i)
		if !ok {
			return "", false
		}
		for _, e := range models {
			if bytes.Equal(e.model, name) {
				return "", false
			}
		}
		i = next
		if i >= len(s) || s[i] != '{' {
			if i = fastSkip(s, i); i < 0 {
				return "", false
			}
			continue // not an object: not a model's counts
		}
		var u ModelUsage
		var seen [8]bool
		i++
		for i < len(s) && s[i] != '}' {
			if s[i] == ',' {
				i++
			}
			k, next, ok := fastKey(s, i)
			if !ok {
				return "", false
			}
			i = next
			slot := slices.Index(usageCountKeys[:], string(k))
			end := fastSkip(s, i)
			if end < 0 {
				return "", false
			}
			if slot < 0 {
				i = end
				continue
			}
			if seen[slot] {
				return "", false // a count named twice: ExtractUsage's rules
			}
			seen[slot] = true
			var n int64 // null, a string, an object: 0
			if c := s[i]; c == '-' || c >= '0' && c <= '9' {
				v, rest, ok := leadingInt(s[i:end])
				if !ok || len(rest) != 0 {
					return "", false // a float or an integer past int64: ExtractUsage's rules
				}
				n = v
			}
			i = end
			switch slot {
			case 0:
				u.Requests = n
			case 1, 2:
				u.PromptTokens += n
			case 3, 4:
				u.CompletionTokens += n
			case 5:
				u.TotalTokens = n
			case 6:
				u.CacheRead = n
			case 7:
				u.CacheCreation = n
			}
		}
		if i >= len(s) {
			return "", false
		}
		i++ // }
		if u.TotalTokens == 0 {
			u.TotalTokens = u.PromptTokens + u.CompletionTokens
		}
		models = append(models, entry{name, u})
	}
	slices.SortFunc(models, func(a, b entry) int { return bytes.Compare(a.model, b.model) })
	b := make([]byte, 0, 96)
	for _, e := range models {
		c := e.u
		if c.zero() {
			continue
		}
		b = strconv.AppendInt(b, int64(len(e.model)), 10)
		b = append(b, ':')
		b = append(b, e.model...)
		for _, n := range [...]int64{c.Requests, c.PromptTokens, c.CompletionTokens, c.TotalTokens, c.CacheRead, c.CacheCreation} {
			b = append(b, ' ')
			b = strconv.AppendInt(b, n, 10)
		}
		b = append(b, ';')
	}
	return string(b), true
}

// usageCountKeys are the counts ExtractUsage reads in a model's usage.
var usageCountKeys = [...]string{"requests", "prompt_tokens", "input_tokens", "completion_tokens", "output_tokens",
	"total_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"}

// fastKey reads `"key":` at s[i] in text without escapes; it returns the key and the index
// of its value.
func fastKey(s []byte, i int) ([]byte, int, bool) {
	if i >= len(s) || s[i] != '"' {
		return nil, 0, false
	}
	j := bytes.IndexByte(s[i+1:], '"')
	if j < 0 || i+j+2 >= len(s) || s[i+j+2] != ':' {
		return nil, 0, false
	}
	return s[i+1 : i+1+j], i + j + 3, true
}

// fastSkip returns the index just past the JSON value at s[i] in compact text without
// escapes, -1 when it ends early.
func fastSkip(s []byte, i int) int {
	depth := 0
	for ; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			j := bytes.IndexByte(s[i+1:], '"')
			if j < 0 {
				return -1
			}
			i += j + 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
		case ',':
			if depth == 0 {
				return i
			}
		}
		if depth == 0 && (s[i] == '"' || s[i] == '}' || s[i] == ']') {
			return i + 1
		}
	}
	if depth == 0 {
		return i
	}
	return -1
}
