package pyjson

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// batchBody is a body shaped like an upsert_batch request of the trace ingest (see callBatch in
// internal/traceapi/bench_test.go): n calls, a start item and an end item each.
func batchBody(n int) []byte {
	var sb strings.Builder
	sb.WriteString(`{"batch":[`)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const project, trace = "ent/ingest", "tr"
	for i := 0; i < n; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		parent := "null"
		if i > 0 {
			parent = fmt.Sprintf(`"%s-%d"`, trace, i-1)
		}
		at := t0.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)
		fmt.Fprintf(&sb, `{"mode":"start","req":{"start":{"project_id":%q,"id":"%s-%d","trace_id":%q,"parent_id":%s,"op_name":"weave:///%s/op/llm:abc","started_at":%q,"attributes":{},"inputs":{"prompt":"question %d","temperature":0.7}}}},`,
			project, trace, i, trace, parent, project, at, i)
		fmt.Fprintf(&sb, `{"mode":"end","req":{"end":{"project_id":%q,"id":"%s-%d","ended_at":%q,"output":{"text":"answer %d"},"summary":{"usage":{"gpt-4o":{"prompt_tokens":%d,"completion_tokens":%d,"requests":1}}}}}}`,
			project, trace, i, at, i, 10+i%7, 5+i%3)
	}
	sb.WriteString(`]}`)
	return []byte(sb.String())
}

// BenchmarkParseShallowBatch is the first pass of the trace ingest's batch decoding:
// ParseShallow(body, 1) of a batch of 1,000 calls (2,000 items), which validates each item
// and keeps it as raw text.
func BenchmarkParseShallowBatch(b *testing.B) {
	body := batchBody(1000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		v, err := ParseShallow(body, 1)
		if err != nil || len(v.Obj) != 1 || len(v.Obj[0].Val.Arr) != 2000 {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckBatch is the scan of BenchmarkParseShallowBatch without building anything.
func BenchmarkCheckBatch(b *testing.B) {
	body := batchBody(1000)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(body); err != nil {
			b.Fatal(err)
		}
	}
}

// skipResult is what skip (or refSkip) gives for data: the error and where the parser stopped.
type skipResult struct {
	err string // "" when none; ErrTooDeep's text; or a SyntaxError's message and offset
	end int
}

func runSkip(data []byte, depth int, ref bool) skipResult {
	p := &parser{s: data}
	p.ws()
	var err error
	if ref {
		err = p.refSkip(depth)
	} else {
		err = p.skip(depth)
	}
	if err != nil {
		// The offset of a syntax error is in its text; p.i after an error is not part of
		// the contract.
		return skipResult{err: err.Error(), end: -1}
	}
	return skipResult{end: p.i}
}

// checkSkip holds skip to refSkip (the byte-at-a-time scanner it replaced) on data: the same
// end, or the same error (message and offset), at several starting depths; and Check to Parse:
// the same data accepted.
func checkSkip(t *testing.T, data []byte) {
	t.Helper()
	for _, depth := range []int{0, 1, 2, MaxDepth - 2, MaxDepth, MaxDepth + 1} {
		got, want := runSkip(data, depth, false), runSkip(data, depth, true)
		if got != want {
			t.Fatalf("skip(%q) at depth %d = %+v, refSkip gives %+v", data, depth, got, want)
		}
	}
	cerr := Check(data)
	_, perr := Parse(data)
	if (cerr == nil) != (perr == nil) || (cerr == ErrTooDeep) != (perr == ErrTooDeep) {
		t.Fatalf("Check(%q) = %v, Parse gives %v", data, cerr, perr)
	}
	var cs, ps *SyntaxError
	if errors.As(cerr, &cs) && errors.As(perr, &ps) && cs.Offset != ps.Offset {
		t.Fatalf("Check(%q) = %v, Parse gives %v", data, cerr, perr)
	}
	for _, depth := range []int{1, 2} {
		v, err := ParseShallow(data, depth)
		if (err == nil) != (perr == nil) {
			t.Fatalf("ParseShallow(%q, %d) = %v, Parse gives %v", data, depth, err, perr)
		}
		if err == nil {
			checkRaw(t, v)
		}
	}
}

// checkRaw: the Raw text ParseShallow keeps is one whole valid value.
func checkRaw(t *testing.T, v Value) {
	t.Helper()
	switch v.Kind {
	case Raw:
		if _, err := Parse([]byte(v.Str)); err != nil {
			t.Fatalf("Raw %q does not parse: %v", v.Str, err)
		}
	case Array:
		for _, e := range v.Arr {
			checkRaw(t, e)
		}
	case Object:
		for _, m := range v.Obj {
			checkRaw(t, m.Val)
		}
	}
}

// stringPieces are pieces of string bodies of every class of byte the string scanner tells
// apart: plain ASCII, quotes, escapes (good, bad, truncated, surrogates), control characters,
// UTF-8 of each length, and invalid UTF-8 of each kind.
var stringPieces = []string{
	"a", "abcdefgh", " ", "~", "\x7f", `\"`, `\\`, `\/`, `\b`, `\f`, `\n`, `\r`, `\t`, `\u0041`,
	`\u00e9`, `\uD83D\uDE00`, `\ud800`, `\udc00`, `\ud800\u0041`, `\ud800\uZZZZ`, `\uABCD`,
	`\uabcg`, `\u12`, `\q`, `\x`, `\'`, `\`, `\u`, "\x00", "\x01", "\x1f", "\t", "\n", "é", "€",
	"😀", "\u2028", "\xff", "\xfe", "\x80", "\xbf", "\xc0\x80", "\xc1\xbf", "\xc3", "\xe2\x82",
	"\xed\xa0\x80", "\xed\xbf\xbf", "\xef\xbf\xbf", "\xf4\x8f\xbf\xbf", "\xf4\x90\x80\x80",
	"\xf5\x80\x80\x80", "\xf0\x9f\x98", "\xe0\x80\xaf", `"`, "\x20",
}

// skipCorpus is the inputs the differential tests and the fuzz target start from.
func skipCorpus(tb testing.TB) [][]byte {
	var c [][]byte
	add := func(s string) { c = append(c, []byte(s)) }
	for _, s := range []string{
		``, ` `, `"`, `""`, `"a"`, `"abc`, `"abcdefghijklmnop"`, `"abcdefghijklmno\"`, `{}`, `[]`,
		`{"a":1}`, `{"a" : [1, 2.5e-3, -0, true, false, null, "x"] , "b":{}}`, " [ 1 ,\t2\n,\r3 ] ",
		`[1,]`, `[,1]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{1:2}`, `[1 2]`, `{"a":1 "b":2}`,
		`[1}`, `{"a":1]`, `01`, `-`, `-a`, `1.`, `1.e5`, `1e`, `1e+`, `1E-7`, `-0.0e0`, `.5`, `+1`,
		`tru`, `true`, `truex`, `nul`, `null`, `fals`, `false`, `NaN`, `Infinity`, `[tru]`, `x`,
		`{"a":1} x`, `[1] [2]`, `["a\u00"]`, `{"\q":1}`, `{"a\u0000b":"\ud800"}`,
		strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth),
		strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1),
		strings.Repeat("[", MaxDepth+2) + strings.Repeat("]", MaxDepth+2),
		strings.Repeat(`{"a":`, MaxDepth+1) + "1" + strings.Repeat("}", MaxDepth+1),
		strings.Repeat(`{"a":[`, 200) + strings.Repeat("]}", 200),
		strings.Repeat("[", MaxDepth+1) + "1" + strings.Repeat("]", MaxDepth+1),
		strings.Repeat("[", MaxDepth+1),
		strings.Repeat("[", 70) + strings.Repeat("{}, [], ", 3) + `{"x":` + strings.Repeat("[", 70) + `1` +
			strings.Repeat("]", 70) + "}" + strings.Repeat("]", 70),
	} {
		add(s)
	}
	for _, g := range loadGoldens(tb) {
		add(g.In)
	}
	// Each piece at every offset from a word boundary, after and before plain text and each
	// other piece, as a value and as a key.
	for k, a := range stringPieces {
		for pad := 0; pad < 17; pad++ {
			body := strings.Repeat("x", pad) + a
			add(`"` + body + `"`)
			add(`"` + body)
			add(`"` + body + "yyyyyyyyy\"")
			add(`{"` + body + `":[1,"` + body + `"]}`)
		}
		b := stringPieces[(k*7+3)%len(stringPieces)]
		add(`["` + a + b + `", "` + b + a + `"]`)
	}
	// Every byte, alone, escaped and after a \u, across a word boundary.
	for b := range 256 {
		for _, pad := range []int{0, 5, 6, 7, 8} {
			x := strings.Repeat("x", pad)
			add(`"` + x + string([]byte{byte(b)}) + `"`)
			add(`"` + x + `\` + string([]byte{byte(b)}) + `"`)
			add(`"` + x + `\u0` + string([]byte{byte(b)}) + `0a"`)
		}
	}
	// Every byte in place of each byte of a small document, and inserted before it.
	small := `[1,-0,"a",{"b":-2.5e3,"c":[true,null]},0.5E-1]`
	for k := range len(small) {
		for b := range 256 {
			add(small[:k] + string([]byte{byte(b)}) + small[k+1:])
			add(small[:k] + string([]byte{byte(b)}) + small[k:])
		}
	}
	// Every prefix of a document with a bit of everything: each way of ending early.
	doc := `{"batch":[{"mode":"start","req":{"id":"tr-1","p":null,"t":0.7,"e":-1.5E+3,"ok":true,` +
		`"s":"é\u00e9\n😀","a":[],"o":{}}}, {"x" : [ false , "y" ] } ]}`
	for n := range len(doc) {
		add(doc[:n])
	}
	return c
}

// TestSkipMatchesReference holds skip to refSkip on random inputs; FuzzSkip's seeds (run by
// go test too) are the corpus of edge cases.
func TestSkipMatchesReference(t *testing.T) {
	// Random strings of pieces.
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var sb strings.Builder
		sb.WriteByte('"')
		for range rng.IntN(12) {
			sb.WriteString(stringPieces[rng.IntN(len(stringPieces))])
			if rng.IntN(3) == 0 {
				sb.WriteString(strings.Repeat("z", rng.IntN(9)))
			}
		}
		if rng.IntN(4) != 0 {
			sb.WriteByte('"')
		}
		s := sb.String()
		checkSkip(t, []byte(s))
		checkSkip(t, []byte(`[`+s+`,{`+s+`:1}]`))
	}
	// The benchmark's body, and a few corruptions of it.
	body := batchBody(50)
	checkSkip(t, body)
	for range 2000 {
		b := append([]byte(nil), body...)
		b[rng.IntN(len(b))] = byte(rng.IntN(256))
		checkSkip(t, b)
	}
}

func FuzzSkip(f *testing.F) {
	for _, data := range skipCorpus(f) {
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkSkip(t, data) })
}
