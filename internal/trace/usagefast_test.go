package trace

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/pyjson"
)

// randomSummary is a call summary as clients send them, with the cases encodeUsageFast must
// read as ExtractUsage does or leave to it: usage among other keys or nested elsewhere, models
// whose value is not an object, counts as integers, negatives, floats, exponents, integers past
// int64, null, strings, objects (OpenAI's *_details), counts and models named twice, escapes.
func randomSummary(rng *rand.Rand) string {
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	count := func() string {
		if rng.IntN(4) > 0 {
			return pick("0", "1", "17", "-3", "123456789", "9223372036854775807", "-9223372036854775808")
		}
		return pick("1.5", "2e3", "null", `"7"`, "99999999999999999999", `{"cached_tokens":0}`, "[1,2]", "true")
	}
	countKeys := []string{"requests", "prompt_tokens", "input_tokens", "completion_tokens", "output_tokens", "total_tokens",
		"cache_read_input_tokens", "cache_creation_input_tokens", "prompt_tokens_details", "cost", "prompt\\u005ftokens"}
	model := func() string {
		if rng.IntN(8) == 0 {
			return pick("5", `"x"`, "null", "[]")
		}
		var b strings.Builder
		b.WriteByte('{')
		for k := range rng.IntN(5) {
			if k > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%q:%s", countKeys[rng.IntN(len(countKeys))], count())
		}
		b.WriteByte('}')
		return strings.ReplaceAll(b.String(), `\\u005f`, `\u005f`)
	}
	usage := func() string {
		if rng.IntN(10) == 0 {
			return pick("5", "null", `"usage"`, "[]")
		}
		var b strings.Builder
		b.WriteByte('{')
		for k := range rng.IntN(4) {
			if k > 0 {
				b.WriteString(" , ")
			}
			name := pick("gpt-4o", "m", "claude", "", "é")
			if rng.IntN(10) == 0 {
				name = "a\"b"
			}
			fmt.Fprintf(&b, "%q : %s", name, model())
		}
		b.WriteByte('}')
		return b.String()
	}
	var b strings.Builder
	b.WriteByte('{')
	for k := range 1 + rng.IntN(4) {
		if k > 0 {
			b.WriteByte(',')
		}
		switch rng.IntN(10) {
		case 0, 1, 2, 3, 4, 5:
			if k > 0 && rng.IntN(3) > 0 {
				b.WriteString(`"latency_ms":1`)
				continue
			}
			fmt.Fprintf(&b, `"usage":%s`, usage())
		case 8:
			fmt.Fprintf(&b, `"weave":{"status":"success","usage":%s,"latency_ms":12}`, usage())
		case 6:
			b.WriteString(`"note":"the \"usage\": below","list":[{"usage":1}]`)
		case 7:
			b.WriteString(`"note":"a usage note","list":[{"x":"}{]["}]`)
		default:
			fmt.Fprintf(&b, `"status_counts":{"success":%d,"error":0}`, rng.IntN(3))
		}
	}
	b.WriteByte('}')
	return b.String()
}

// TestEncodeUsageFastMatches checks encodeUsageFast against the parsed path on random
// summaries, compacted as callValue stores them: where it reads a summary, the text is
// ExtractUsage's; most plain summaries are its.
func TestEncodeUsageFastMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	handled, total := 0, 0
	for range 20000 {
		raw := randomSummary(rng)
		if pyjson.Check([]byte(raw)) != nil {
			t.Fatalf("generated invalid JSON: %s", raw)
		}
		summary := pyjson.CompactText([]byte(raw))
		total++
		got, ok := encodeUsageFast(summary)
		if !ok {
			continue
		}
		handled++
		if want := encodeUsageParsed(summary); got != want {
			t.Fatalf("%s:\nfast   %q\nparsed %q", summary, got, want)
		}
	}
	t.Logf("the fast path read %d summaries of %d", handled, total)
	if handled < total/8 {
		t.Fatalf("the fast path read %d summaries of %d", handled, total)
	}
	for _, s := range []string{`{"usage":{"gpt-4o":{"prompt_tokens":12,"completion_tokens":6,"requests":1}}}`,
		`{"usage":{"gpt-4o":{"prompt_tokens":12,"completion_tokens":6,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}},"weave":{"latency_ms":5}}`} {
		if _, ok := encodeUsageFast([]byte(s)); !ok {
			t.Errorf("the fast path does not read %s", s)
		}
	}
}

// FuzzEncodeUsage: on any valid JSON object, the fast path (where it answers) writes what the
// parsed path writes.
func FuzzEncodeUsage(f *testing.F) {
	rng := rand.New(rand.NewPCG(9, 9))
	for range 20 {
		f.Add(randomSummary(rng))
	}
	f.Fuzz(func(t *testing.T, raw string) {
		if pyjson.Check([]byte(raw)) != nil || !strings.HasPrefix(strings.TrimSpace(raw), "{") {
			return
		}
		summary := pyjson.CompactText([]byte(strings.TrimSpace(raw)))
		if got, ok := encodeUsageFast(summary); ok {
			if want := encodeUsageParsed(summary); got != want {
				t.Fatalf("%s: fast %q, parsed %q", summary, got, want)
			}
		}
	})
}
