package trace

import (
	"bytes"
	"math"
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
