package main

// The fuzz and fault suite (issue 21, item 7; docs/reliability.md "Fuzz and fault suite").
// This file holds the route fuzz (TestFuzzRoutes) and the store fixtures it shares with the
// kill tests (kill_test.go).

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// faultStore is a store a fault test runs on: extra `hone serve`/`hone worker` arguments.
type faultStore struct {
	name string
	args []string // --db DSN for PostgreSQL; none for SQLite (DATA/hone.db)
}

// forEachFaultStore runs fn on SQLite and, when HONE_TEST_POSTGRES_DSN names a server, on a
// fresh PostgreSQL schema (required under HONE_REQUIRE_CONFORMANCE=1).
func forEachFaultStore(t *testing.T, fn func(t *testing.T, st faultStore)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, faultStore{name: "sqlite"}) })
	t.Run("postgres", func(t *testing.T) {
		if os.Getenv(dbtest.PostgresEnv) == "" {
			skipOrFail(t, "%s is not set: no PostgreSQL server for this test", dbtest.PostgresEnv)
		}
		fn(t, faultStore{name: "postgres", args: []string{"--db", pgSchemaDSN(t)}})
	})
}

// pgSchemaDSN creates a fresh schema on the HONE_TEST_POSTGRES_DSN server, dropped when the
// test ends, and returns a DSN whose search_path is that schema.
func pgSchemaDSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(dbtest.PostgresEnv)
	ctx := context.Background()
	admin, err := db.Open(ctx, dsn)
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	schema := "f_" + hex.EncodeToString(rnd[:])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
		admin.Close()
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// heapSampler records the largest HeapAlloc of this process (the in-process server and the
// test) while it runs.
type heapSampler struct {
	peak atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

func sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		var m runtime.MemStats
		for {
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > h.peak.Load() {
				h.peak.Store(m.HeapAlloc)
			}
			select {
			case <-h.stop:
				return
			case <-t.C:
			}
		}
	}()
	return h
}

// Reset starts a new peak from now and returns the peak so far.
func (h *heapSampler) Reset() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return h.peak.Swap(m.HeapAlloc)
}

func (h *heapSampler) Stop() uint64 { close(h.stop); <-h.done; return h.peak.Load() }

const (
	// fuzzBodyLimit is the fuzzed server's --max-body-bytes: small, so that bodies over the
	// limit are cheap to send to every route (the limit is one middleware for all routes).
	fuzzBodyLimit = 1 << 20
	// fuzzPeakHeapCap bounds this process's sampled heap (server and test together) during
	// the fuzz, the amplifying references included.
	fuzzPeakHeapCap = 768 << 20
	// fuzzHeapAfterGCCap bounds the heap after the fuzz and a GC (nothing held on to).
	fuzzHeapAfterGCCap = 256 << 20
	fuzzSeed           = 21
)

// fuzz5xxAllowed lists the requests known to answer 5xx today, by "METHOD /route|mutation",
// each naming the issue item whose fix removes it. Keep it explicit and short: an entry that
// no longer answers 5xx is reported in the test log, to be removed.
var fuzz5xxAllowed = map[string]string{}

// fuzzMemoryKnown lists the amplifying routes known to take memory out of bounds today (the
// test would exceed its cap, on a machine shared with other work), each naming the issue item
// whose fix removes it; a listed route's amplification runs at a tenth of its size, with its
// peak reported. Remove the entry with the fix: the full size must then stay under the cap.
// Empty since /refs/read_batch is bounded (1,000 refs, 32 MiB of values: issue 21 item 1);
// before, 4 × 1,000 refs to one 256 KiB object took 3 GiB of heap.
var fuzzMemoryKnown = map[string]string{}

// fuzzReq is one request of the fuzz.
type fuzzReq struct {
	route    string // "METHOD /template", as /openapi.json names it
	mutation string
	method   string
	path     string // escaped path and query
	ctype    string
	body     []byte
}

func (r fuzzReq) key() string { return r.route + "|" + r.mutation }

func (r fuzzReq) String() string {
	b := r.body
	more := ""
	if len(b) > 300 {
		b, more = b[:300], fmt.Sprintf("... (%d bytes)", len(r.body))
	}
	return fmt.Sprintf("%s %s [%s] %q%s", r.method, r.path, r.mutation, b, more)
}

// fuzzStats counts what the fuzz sent and got.
type fuzzStats struct {
	requests, ok, c4xx, c5xx, allowed5xx int
	byStatus                             map[int]int
	seen5xx                              map[string]bool
}

// fuzzer sends the requests of one server.
type fuzzer struct {
	t              *testing.T
	store          string
	url            string
	bearer, basic  string
	client         *http.Client
	st             fuzzStats
	failures       []string
	maxFailureLogs int
}

func (f *fuzzer) send(r fuzzReq, authz string) (int, []byte) {
	var rd io.Reader
	if r.body != nil {
		rd = bytes.NewReader(r.body)
	}
	req, err := http.NewRequest(r.method, f.url+r.path, rd)
	if err != nil {
		f.t.Fatalf("%s: %v", r, err)
	}
	if authz != "" {
		req.Header.Set("Authorization", authz)
	}
	if r.ctype != "" {
		req.Header.Set("Content-Type", r.ctype)
	}
	t0 := time.Now()
	resp, err := f.client.Do(req)
	if d := time.Since(t0); d > 2*time.Second && os.Getenv("HONE_FUZZ_VERBOSE") != "" {
		fmt.Fprintf(os.Stderr, "slow (%s): %s\n", d.Round(time.Millisecond), r)
	}
	if err != nil {
		f.fail("%s: no answer (crash or hang): %v", r, err)
		return 0, nil
	}
	defer resp.Body.Close()
	// Keep the head of the answer; drain the rest (answers may stream).
	head, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_, _ = io.Copy(io.Discard, resp.Body)
	f.st.requests++
	f.st.byStatus[resp.StatusCode]++
	switch {
	case resp.StatusCode >= 500:
		if item, ok := fuzz5xxAllowed[r.key()]; ok && (f.store == "postgres" || !strings.Contains(item, "PostgreSQL only")) {
			f.st.allowed5xx++
			f.st.seen5xx[r.key()] = true
		} else {
			if os.Getenv("HONE_FUZZ_VERBOSE") != "" {
				fmt.Fprintf(os.Stderr, "ALLOW\t%q: %q,\n", r.key(), "issue 21 item 4 (PostgreSQL only)")
			}
			f.st.c5xx++
			f.fail("%d: %s\n  answer: %.300s", resp.StatusCode, r, head)
		}
	case resp.StatusCode >= 400:
		f.st.c4xx++
		if msg := checkEnvelope(resp, head); msg != "" {
			f.fail("%d not in the error envelope (%s): %s\n  answer: %.300s", resp.StatusCode, msg, r, head)
		}
	default:
		f.st.ok++
	}
	return resp.StatusCode, head
}

func (f *fuzzer) fail(format string, args ...any) {
	f.t.Helper()
	f.failures = append(f.failures, fmt.Sprintf(format, args...))
	if len(f.failures) <= f.maxFailureLogs {
		f.t.Errorf(format, args...)
	}
}

// checkEnvelope returns what is wrong with a 4xx answer's envelope: {"error":{"message":
// string, "type": string, "param": string or null, "code": the status}}, nothing else.
func checkEnvelope(resp *http.Response, body []byte) string {
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return "content type " + ct
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return "not JSON: " + err.Error()
	}
	if len(top) != 1 || top["error"] == nil {
		return "top-level keys other than error"
	}
	var e map[string]json.RawMessage
	if err := json.Unmarshal(top["error"], &e); err != nil {
		return "error is not an object"
	}
	if len(e) != 4 {
		return "error has other keys than message, type, param, code"
	}
	var msg, typ string
	var param *string
	var code int
	if json.Unmarshal(e["message"], &msg) != nil || msg == "" {
		return "message"
	}
	if json.Unmarshal(e["type"], &typ) != nil || typ == "" {
		return "type"
	}
	if e["param"] == nil || json.Unmarshal(e["param"], &param) != nil {
		return "param"
	}
	if json.Unmarshal(e["code"], &code) != nil || code != resp.StatusCode {
		return "code"
	}
	return ""
}

// openAPIDoc is the part of /openapi.json the fuzz reads.
type openAPIDoc struct {
	Paths      map[string]map[string]openAPIOp `json:"paths"`
	Components struct {
		Schemas map[string]*jsonSchema `json:"schemas"`
	} `json:"components"`
}

type openAPIOp struct {
	Security   []map[string][]string `json:"security"`
	Parameters []struct {
		Name string `json:"name"`
		In   string `json:"in"`
	} `json:"parameters"`
	RequestBody *struct {
		Content map[string]struct {
			Schema *jsonSchema `json:"schema"`
		} `json:"content"`
	} `json:"requestBody"`
}

type jsonSchema struct {
	Ref        string                 `json:"$ref"`
	Type       any                    `json:"type"`
	Properties map[string]*jsonSchema `json:"properties"`
	Required   []string               `json:"required"`
	Items      *jsonSchema            `json:"items"`
	AnyOf      []*jsonSchema          `json:"anyOf"`
	OneOf      []*jsonSchema          `json:"oneOf"`
}

// UnmarshalJSON reads a schema, taking the boolean schemas true and false as {}.
func (s *jsonSchema) UnmarshalJSON(b []byte) error {
	if t := strings.TrimSpace(string(b)); t == "true" || t == "false" {
		return nil
	}
	type plain jsonSchema
	return json.Unmarshal(b, (*plain)(s))
}

func (d *openAPIDoc) resolve(s *jsonSchema) *jsonSchema {
	for i := 0; s != nil && s.Ref != "" && i < 8; i++ {
		s = d.Components.Schemas[s.Ref[strings.LastIndex(s.Ref, "/")+1:]]
	}
	return s
}

// kind is a schema's JSON type: string, integer, number, boolean, array, object or "" (any).
func (d *openAPIDoc) kind(s *jsonSchema) string {
	s = d.resolve(s)
	if s == nil {
		return ""
	}
	switch t := s.Type.(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if x != "null" {
				return fmt.Sprint(x)
			}
		}
	}
	if len(s.Properties) > 0 {
		return "object"
	}
	for _, alt := range append(s.AnyOf, s.OneOf...) {
		if k := d.kind(alt); k != "" && k != "null" {
			return k
		}
	}
	return ""
}

// plausible builds a value of the schema: required properties (and project_id) of objects,
// one nesting level deep, with values a handler could accept.
func (d *openAPIDoc) plausible(name string, s *jsonSchema, depth int) any {
	switch name {
	case "project_id":
		return "local/fuzz"
	case "project":
		return "fuzz"
	case "entity":
		return "local"
	}
	switch d.kind(s) {
	case "string":
		return "x"
	case "integer", "number":
		return 1
	case "boolean":
		return false
	case "array":
		return []any{}
	case "object":
		o := map[string]any{}
		r := d.resolve(s)
		if depth > 1 || r == nil {
			return o
		}
		for _, p := range r.Required {
			o[p] = d.plausible(p, r.Properties[p], depth+1)
		}
		if _, ok := r.Properties["project_id"]; ok {
			o["project_id"] = "local/fuzz"
		}
		return o
	}
	return nil
}

// fuzzBase gives the routes whose generated body would stop at validation a working body, so
// that mutations reach their handlers' later stages.
var fuzzBase = map[string]string{
	"POST /v1/chat/completions":        `{"model":"demo","messages":[{"role":"user","content":"hi"}],"max_tokens":1}`,
	"POST /v1/chat/completions/render": `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`,
	"POST /call/start":                 `{"start":{"project_id":"local/fuzz","id":"c1","trace_id":"t1","op_name":"op","started_at":"2025-01-01T00:00:00Z","attributes":{},"inputs":{"a":1}}}`,
	"POST /call/end":                   `{"end":{"project_id":"local/fuzz","id":"c1","ended_at":"2025-01-01T00:00:01Z","output":1,"summary":{}}}`,
	"POST /obj/create":                 `{"obj":{"project_id":"local/fuzz","object_id":"fuzzobj","val":{"a":1}}}`,
	"POST /table/create":               `{"table":{"project_id":"local/fuzz","rows":[{"a":1}]}}`,
	"POST /feedback/create":            `{"project_id":"local/fuzz","weave_ref":"weave:///local/fuzz/call/c1","feedback_type":"note","payload":{"note":"x"}}`,
	"POST /v1/preview/models":          `{"project":"fuzz","name":"m","base_model":"demo"}`,
	"POST /calls/query":                `{"project_id":"local/fuzz","limit":10}`,
}

// Values of the mutations.
var (
	fuzzWrongTypes = []string{`"s"`, `1`, `true`, `null`, `[]`, `{}`}
	fuzzNumbers    = []string{`1e400`, `-1e400`, `-1`, `0`, `-0`, `1e308`, `-1e308`, `1e-400`, `1.5`,
		`18446744073709551616`, `-9223372036854775809`, `123456789012345678901234567890`}
	// Strings as JSON text: NUL, lone surrogates, escapes of control characters, and bytes
	// that are not UTF-8 (raw, inside the quotes).
	fuzzStrings = []string{`"nul\u0000here"`, `"\u0000"`, `"\ud800"`, `"x\udc00y"`, "\"\xff\xfe\"", "\"a\xc3\"",
		`"../../etc/passwd"`, `"local/../x"`, `"weave:///local/fuzz/object/fuzzobj:*"`, `"%00"`, `""`,
		`"' OR 1=1 --"`, `"\u202e"`}
	// Path parameter values (escaped as they go in the URL).
	fuzzPathValues = []string{"%00", "%FF%FE", "..", "%2E%2E%2F%2E%2E%2Fetc%2Fpasswd", "a%2Fb",
		strings.Repeat("a", 4096), "%27%20OR%201%3D1--", "-1", "1e400", "%E2%80%AE", "%ED%A0%80", "%C3"}
	fuzzQueryValues = []string{"-1", "1e400", "99999999999999999999", "%00", "%FF", "%ED%A0%80", "", "local%2F..%2Fx"}
)

// malformedBodies are bodies that are not one JSON object.
var malformedBodies = []string{``, `{`, `{"a":`, `[]`, `null`, `"s"`, `123`, `{"a":1}{"b":2}`, `{"a":1,}`,
	"{\"a\":\"\x00\"}", "\xff\xfe{}", "\xef\xbb\xbf{}", `{"a":1e400}`, `{'a':1}`, `{"a" 1}`, `{"a":tru}`,
	`{"a":"\ud800"}`, `{"a":"\x"}`, "{\"a\":1}\x00"}

func nested(depth int, open, close string) string {
	return strings.Repeat(open, depth) + "1" + strings.Repeat(close, depth)
}

// routeRequests builds the requests of one route. pathVals are plausible path values.
func routeRequests(d *openAPIDoc, method, tmpl string, op openAPIOp, pathVals map[string]string, rng *mrand.Rand, short bool) []fuzzReq {
	route := strings.ToUpper(method) + " " + tmpl
	var params, query []string
	for _, p := range op.Parameters {
		switch p.In {
		case "path":
			params = append(params, p.Name)
		case "query":
			query = append(query, p.Name)
		}
	}
	fill := func(override map[string]string) string {
		p := tmpl
		for _, name := range params {
			v, ok := override[name]
			if !ok {
				v = pathVals[name]
				if v == "" {
					v = "x"
				}
			}
			p = strings.Replace(p, "{"+name+"}", v, 1)
		}
		return p
	}
	base := fill(nil)
	if len(query) > 0 {
		var q []string
		for _, name := range query {
			q = append(q, name+"="+url.QueryEscape(fmt.Sprint(d.plausible(name, nil, 0))))
		}
		base += "?" + strings.Join(q, "&")
	}

	ctype := ""
	var schema *jsonSchema
	if op.RequestBody != nil {
		for ct, c := range op.RequestBody.Content {
			ctype, schema = ct, c.Schema
		}
	}
	var baseBody []byte
	if ctype == "application/json" {
		if b, ok := fuzzBase[route]; ok {
			baseBody = []byte(b)
		} else {
			baseBody, _ = json.Marshal(d.plausible("", schema, 0))
		}
	}
	var out []fuzzReq
	add := func(mutation, path, ct string, body []byte) {
		out = append(out, fuzzReq{route: route, mutation: mutation, method: strings.ToUpper(method), path: path, ctype: ct, body: body})
	}
	add("plausible", base, ctype, baseBody)

	// Path and query parameters.
	for _, name := range params {
		for i, v := range fuzzPathValues {
			if short && i%3 != 0 {
				continue
			}
			add("path "+name+"="+truncate(v, 24), fill(map[string]string{name: v}), ctype, baseBody)
		}
	}
	qnames := query
	if method == "get" {
		qnames = append(qnames, "limit", "offset", "after")
	}
	for _, name := range qnames {
		for _, v := range fuzzQueryValues {
			sep := "?"
			if strings.Contains(base, "?") {
				sep = "&"
			}
			add("query "+name+"="+v, base+sep+name+"="+v, ctype, baseBody)
		}
	}

	switch {
	case ctype == "application/json":
		out = append(out, jsonMutations(d, route, strings.ToUpper(method), base, schema, baseBody, rng, short)...)
	case strings.HasPrefix(ctype, "multipart/"):
		for _, c := range []struct{ m, ct, body string }{
			{"multipart no boundary", "multipart/form-data", "--x\r\n\r\n"},
			{"multipart garbage", "multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"../../a\"\r\n\r\n\x00\xff\r\n--x--\r\n"},
			{"multipart truncated", "multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"project_id\"\r\n\r\nlocal/fuzz"},
			{"multipart as json", "application/json", `{"project_id":"local/fuzz"}`},
			{"multipart nul project", "multipart/form-data; boundary=x", "--x\r\nContent-Disposition: form-data; name=\"project_id\"\r\n\r\nlocal/f\x00z\r\n--x--\r\n"},
		} {
			add(c.m, base, c.ct, []byte(c.body))
		}
		add("over the body limit", base, "multipart/form-data; boundary=x", overLimit("--x\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a\"\r\n\r\n"))
	default:
		// No documented body: a JSON or garbage one must not matter, nor one over the limit
		// (except on the upload route, which has its own limit).
		if method != "get" {
			add("unexpected json body", base, "application/json", []byte(`{"a":`+nested(10000, "[", "]")+`}`))
			add("unexpected garbage body", base, "application/octet-stream", []byte("\x00\xff garbage"))
			add("over the body limit", base, "application/json", overLimit(`{"a":"`))
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// overLimit is a body one byte over the fuzzed server's limit, starting with prefix.
func overLimit(prefix string) []byte {
	b := make([]byte, fuzzBodyLimit+1)
	copy(b, prefix)
	for i := len(prefix); i < len(b); i++ {
		b[i] = 'a'
	}
	return b
}

// jsonMutations are the body mutations of a JSON route.
func jsonMutations(d *openAPIDoc, route, method, path string, schema *jsonSchema, base []byte, rng *mrand.Rand, short bool) []fuzzReq {
	var out []fuzzReq
	add := func(mutation string, body []byte) {
		out = append(out, fuzzReq{route: route, mutation: mutation, method: method, path: path, ctype: "application/json", body: body})
	}
	for i, b := range malformedBodies {
		add(fmt.Sprintf("malformed %d", i), []byte(b))
	}
	add("nested array 10000", []byte(nested(10000, "[", "]")))
	add("nested object 10000", []byte(nested(10000, `{"a":`, "}")))
	add("over the body limit", overLimit(`{"a":"`))
	add("wrong content type", base)
	out[len(out)-1].ctype = "text/plain"

	var obj map[string]json.RawMessage
	if json.Unmarshal(base, &obj) != nil {
		return out
	}
	with := func(o map[string]json.RawMessage, path []string, v string) []byte {
		// Sets o[path...] = v on a copy (path of one or two keys).
		c := map[string]json.RawMessage{}
		for k, x := range o {
			c[k] = x
		}
		if len(path) == 1 {
			c[path[0]] = json.RawMessage(v)
		} else {
			var inner map[string]json.RawMessage
			_ = json.Unmarshal(c[path[0]], &inner)
			if inner == nil {
				inner = map[string]json.RawMessage{}
			}
			inner[path[1]] = json.RawMessage(v)
			b, _ := json.Marshal(inner)
			c[path[0]] = b
		}
		return marshalRaw(c)
	}
	add("unknown field", with(obj, []string{"zz_unknown_field"}, `1`))
	add("duplicate key", append(append([]byte(nil), base[:len(base)-1]...), []byte(`,"project_id":"other/x"}`)...))

	// Field mutations: every property, one level deep, typed by the schema.
	type field struct {
		path []string
		kind string
	}
	var fields []field
	root := d.resolve(schema)
	if root != nil {
		names := sortedKeys(root.Properties)
		for _, n := range names {
			ps := root.Properties[n]
			k := d.kind(ps)
			fields = append(fields, field{[]string{n}, k})
			if r := d.resolve(ps); k == "object" && r != nil {
				for _, m := range sortedKeys(r.Properties) {
					fields = append(fields, field{[]string{n, m}, d.kind(r.Properties[m])})
				}
			}
		}
	}
	for _, f := range fields {
		name := strings.Join(f.path, ".")
		for _, v := range fuzzWrongTypes {
			if short && rng.IntN(3) != 0 {
				continue
			}
			add("type "+name+"="+v, with(obj, f.path, v))
		}
		nums := fuzzNumbers
		if f.kind != "integer" && f.kind != "number" {
			nums = nums[:3]
		}
		for _, v := range nums {
			add("number "+name+"="+v, with(obj, f.path, v))
		}
		strs := fuzzStrings
		if f.kind != "string" && f.kind != "" {
			strs = strs[:3]
		}
		for _, v := range strs {
			add("string "+name+"="+truncate(v, 24), with(obj, f.path, v))
		}
		add("nested "+name, with(obj, f.path, nested(10000, "[", "]")))
		add("nul key in "+name, with(obj, f.path, `{"k\u0000":1,"\ud800":2}`))
	}
	// A few random byte flips of the plausible body (seeded).
	for i := 0; i < 8; i++ {
		b := append([]byte(nil), base...)
		for j := 0; j < 3; j++ {
			b[rng.IntN(len(b))] = byte(rng.IntN(256))
		}
		add(fmt.Sprintf("flip %d", i), b)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// marshalRaw writes an object of raw values in key order without checking them (values may
// be invalid UTF-8 on purpose).
func marshalRaw(o map[string]json.RawMessage) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range sortedKeys(o) {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteByte(':')
		b.Write(o[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// TestFuzzRoutes sends every route of /openapi.json malformed, mistyped, huge, deep, hostile
// and oversized requests (seeded, deterministic), then amplifying trace references; every
// answer must be below 500 and every 4xx in the one error envelope, with the process's heap
// bounded. It prints the figures of docs/reliability.md.
func TestFuzzRoutes(t *testing.T) {
	forEachFaultStore(t, func(t *testing.T, st faultStore) {
		if testing.Short() && st.name == "postgres" {
			t.Skip("-short: the fuzz runs on SQLite only")
		}
		dir := t.TempDir()
		args := append([]string{"--max-body-bytes", fmt.Sprint(fuzzBodyLimit), "--train-workers", "0",
			"--max-concurrent-per-key", "0", "--log-level", "error"}, st.args...)
		s := startServer(t, dir, args...)
		key := initialKey(t, dir)
		f := &fuzzer{t: t, store: st.name, url: s.url, bearer: "Bearer " + key, basic: basic("api", key),
			client:         &http.Client{Timeout: 60 * time.Second},
			st:             fuzzStats{byStatus: map[int]int{}, seen5xx: map[string]bool{}},
			maxFailureLogs: 40}

		code, _, body := do(t, "GET", s.url+"/openapi.json", "", "")
		var doc openAPIDoc
		if code != 200 || json.Unmarshal(body, &doc) != nil {
			t.Fatalf("openapi.json: %d", code)
		}
		authFor := func(path string, op openAPIOp) string {
			for _, sec := range op.Security {
				if _, ok := sec["basic"]; ok {
					return f.basic
				}
			}
			return f.bearer
		}

		// Plausible path values: objects that exist.
		objBody := `{"obj":{"project_id":"local/fuzz","object_id":"fuzzobj","val":{"a":1}}}`
		code, _, body = do(t, "POST", s.url+"/obj/create", f.basic, objBody)
		digest, _ := jsonOf(t, code, body, 200)["digest"].(string)
		code, _, body = do(t, "POST", s.url+"/v1/preview/models", f.bearer, `{"project":"fuzz","name":"pm","base_model":"demo"}`)
		modelID, _ := jsonOf(t, code, body, 200)["id"].(string)
		pathVals := map[string]string{"entity": "local", "project": "fuzz", "run": "r1", "object_id": "fuzzobj",
			"digest": digest, "model": modelID, "id": "job-none", "segment": "x", "hash": "x", "file": "x",
			"md5": "d41d8cd98f00b204e9800998ecf8427e", "region": "us", "artifact": "a", "name": "n", "rest": "weave"}

		heap := sampleHeap()
		start := time.Now()
		rng := mrand.New(mrand.NewPCG(fuzzSeed, fuzzSeed))
		for _, p := range sortedKeys(doc.Paths) {
			if strings.Contains(p, "/_test/") {
				continue // this file's test routes (one panics on purpose)
			}
			for _, m := range sortedKeys(doc.Paths[p]) {
				op := doc.Paths[p][m]
				authz := authFor(p, op)
				rs := routeRequests(&doc, m, p, op, pathVals, rng, testing.Short())
				t0 := time.Now()
				for _, r := range rs {
					f.send(r, authz)
				}
				if os.Getenv("HONE_FUZZ_VERBOSE") != "" {
					fmt.Fprintf(os.Stderr, "fuzz %s %s: %d requests in %s\n", m, p, len(rs), time.Since(t0).Round(time.Millisecond))
				}
			}
		}
		routesDone := time.Since(start)
		peak := heap.Reset()
		t.Logf("routes: peak heap %d MiB", peak>>20)
		ampPeak := amplify(t, f, heap)
		peak = max(peak, ampPeak, heap.Stop())
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)

		// The server is still up and answers.
		if code, _, body := do(t, "POST", s.url+"/v1/chat/completions", f.bearer, fuzzBase["POST /v1/chat/completions"]); code != 200 {
			t.Errorf("after the fuzz, chat: %d %s", code, body)
		}
		for k := range fuzz5xxAllowed {
			if !f.st.seen5xx[k] && (st.name == "postgres" || !strings.Contains(fuzz5xxAllowed[k], "PostgreSQL only")) {
				t.Logf("allow-list entry %q no longer answers 5xx here: remove it", k)
			}
		}
		statuses := sortedKeys(func() map[string]int {
			m := map[string]int{}
			for c, n := range f.st.byStatus {
				m[fmt.Sprint(c)] = n
			}
			return m
		}())
		var parts []string
		for _, c := range statuses {
			var n int
			fmt.Sscan(c, &n)
			parts = append(parts, fmt.Sprintf("%s:%d", c, f.st.byStatus[n]))
		}
		t.Logf("fuzz %s: seed %d, %d routes, %d requests in %s (+ amplification: %s total): %d 2xx, %d 4xx, %d 5xx (%d allow-listed); statuses %s; peak heap %d MiB (cap %d), after GC %d MiB (cap %d)",
			st.name, fuzzSeed, countRoutes(&doc), f.st.requests, routesDone.Round(time.Millisecond), time.Since(start).Round(time.Millisecond),
			f.st.ok, f.st.c4xx, f.st.c5xx+f.st.allowed5xx, f.st.allowed5xx, strings.Join(parts, " "),
			peak>>20, fuzzPeakHeapCap>>20, ms.HeapAlloc>>20, fuzzHeapAfterGCCap>>20)
		if len(f.failures) > f.maxFailureLogs {
			t.Errorf("%d more failures not shown", len(f.failures)-f.maxFailureLogs)
		}
		if peak > fuzzPeakHeapCap {
			t.Errorf("peak heap %d MiB over the cap of %d MiB", peak>>20, fuzzPeakHeapCap>>20)
		}
		if ms.HeapAlloc > fuzzHeapAfterGCCap {
			t.Errorf("heap after GC %d MiB over the cap of %d MiB", ms.HeapAlloc>>20, fuzzHeapAfterGCCap>>20)
		}
	})
}

func countRoutes(d *openAPIDoc) int {
	n := 0
	for _, ms := range d.Paths {
		n += len(ms)
	}
	return n
}

// amplify sends requests whose small bodies name a lot of stored data: one object of 256 KiB
// referenced 1,000 times in one /refs/read_batch (about 100 KB of request for 256 MB of
// answer if nothing bounds it), calls whose inputs hold those references, read back expanded,
// and a table of them.
func amplify(t *testing.T, f *fuzzer, heap *heapSampler) uint64 {
	var peak uint64
	phase := func(name string) {
		p := heap.Reset()
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t.Logf("amplify %s: peak heap %d MiB, after GC %d MiB", name, p>>20, ms.HeapAlloc>>20)
		peak = max(peak, p)
		heap.Reset()
	}
	big := strings.Repeat("A", 256<<10)
	obj := fmt.Sprintf(`{"obj":{"project_id":"local/fuzz","object_id":"bigobj","val":{"v":%q}}}`, big)
	code, head := f.send(fuzzReq{route: "POST /obj/create", mutation: "amplify: 256 KiB object", method: "POST", path: "/obj/create", ctype: "application/json", body: []byte(obj)}, f.basic)
	if code != 200 {
		t.Errorf("creating the big object: %d %s", code, head)
		return 0
	}
	phase("256 KiB object")
	var res struct{ Digest string }
	_ = json.Unmarshal(head, &res)
	ref := fmt.Sprintf("weave:///local/fuzz/object/bigobj:%s", res.Digest)
	// The read_batch amplification runs at a tenth of its size while it is known unbounded.
	nRefs, readBatch := 1000, "1000 refs to 256 KiB"
	if item, ok := fuzzMemoryKnown["POST /refs/read_batch"]; ok {
		nRefs, readBatch = 100, "100 refs to 256 KiB"
		t.Logf("POST /refs/read_batch: known unbounded (%s): 4 × %d refs instead of 4 × 1000", item, nRefs)
	}
	refs := make([]string, 1000)
	for i := range refs {
		refs[i] = ref
	}
	rb, _ := json.Marshal(map[string]any{"refs": refs[:nRefs]})
	var wg sync.WaitGroup
	// Four at once, as a client in a hurry would.
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f2 := *f
			f2.st = fuzzStats{byStatus: map[int]int{}, seen5xx: map[string]bool{}}
			f2.failures = nil
			f2.send(fuzzReq{route: "POST /refs/read_batch", mutation: "amplify: " + readBatch, method: "POST", path: "/refs/read_batch", ctype: "application/json", body: rb}, f.basic)
			mergeStats(f, &f2)
		}()
	}
	wg.Wait()
	phase(readBatch)
	// A call whose inputs hold 200 references, read back with its inputs expanded.
	inputs, _ := json.Marshal(map[string]any{"r": refs[:200], "one": ref})
	start := fmt.Sprintf(`{"start":{"project_id":"local/fuzz","id":"amp1","trace_id":"amp","op_name":"op","started_at":"2025-01-01T00:00:00Z","attributes":{},"inputs":%s}}`, inputs)
	f.send(fuzzReq{route: "POST /call/start", mutation: "amplify: 200 refs in inputs", method: "POST", path: "/call/start", ctype: "application/json", body: []byte(start)}, f.basic)
	for _, q := range []string{
		`{"project_id":"local/fuzz","expand_columns":["inputs.one","inputs.r"],"limit":100}`,
		`{"project_id":"local/fuzz","expand_columns":["inputs.one"],"columns":["inputs"],"limit":100}`,
		`{"project_id":"local/fuzz","call_ids":["amp1"],"expand_columns":["inputs.one","inputs.r","inputs.r.0"]}`,
	} {
		f.send(fuzzReq{route: "POST /calls/query", mutation: "amplify: expand refs", method: "POST", path: "/calls/query", ctype: "application/json", body: []byte(q)}, f.basic)
		f.send(fuzzReq{route: "POST /calls/stream_query", mutation: "amplify: expand refs", method: "POST", path: "/calls/stream_query", ctype: "application/json", body: []byte(q)}, f.basic)
	}
	phase("calls expanding refs")
	// A table of 1,000 rows each referencing the object, read back.
	rows := make([]string, 1000)
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"r":%q,"i":%d}`, ref, i)
	}
	tb := `{"table":{"project_id":"local/fuzz","rows":[` + strings.Join(rows, ",") + `]}}`
	code, head = f.send(fuzzReq{route: "POST /table/create", mutation: "amplify: 1000 ref rows", method: "POST", path: "/table/create", ctype: "application/json", body: []byte(tb)}, f.basic)
	if code == 200 {
		var tr struct{ Digest string }
		_ = json.Unmarshal(head, &tr)
		q := fmt.Sprintf(`{"project_id":"local/fuzz","digest":%q}`, tr.Digest)
		f.send(fuzzReq{route: "POST /table/query", mutation: "amplify: 1000 ref rows", method: "POST", path: "/table/query", ctype: "application/json", body: []byte(q)}, f.basic)
		f.send(fuzzReq{route: "POST /table/query_stream", mutation: "amplify: 1000 ref rows", method: "POST", path: "/table/query_stream", ctype: "application/json", body: []byte(q)}, f.basic)
	}
	phase("table of ref rows")
	// Chat content just under the body limit (the context-length check must refuse it early).
	content := strings.Repeat("a ", (fuzzBodyLimit-200)/2)
	chat := fmt.Sprintf(`{"model":"demo","messages":[{"role":"user","content":%q}],"max_tokens":1}`, content)
	f.send(fuzzReq{route: "POST /v1/chat/completions", mutation: "amplify: 1 MiB content", method: "POST", path: "/v1/chat/completions", ctype: "application/json", body: []byte(chat)}, f.bearer)
	phase("chat 1 MiB")
	return peak
}

var statsMu sync.Mutex

func mergeStats(dst, src *fuzzer) {
	statsMu.Lock()
	defer statsMu.Unlock()
	dst.st.requests += src.st.requests
	dst.st.ok += src.st.ok
	dst.st.c4xx += src.st.c4xx
	dst.st.c5xx += src.st.c5xx
	dst.st.allowed5xx += src.st.allowed5xx
	for k, v := range src.st.byStatus {
		dst.st.byStatus[k] += v
	}
	for k := range src.st.seen5xx {
		dst.st.seen5xx[k] = true
	}
	dst.failures = append(dst.failures, src.failures...)
}
