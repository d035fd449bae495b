package traceapi_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/openapi"
	"github.com/honeai/hone/internal/trace"
	"github.com/honeai/hone/internal/traceapi"
)

type env struct {
	srv    *httptest.Server
	key    string // entity "ent"
	other  string // entity "other"
	router *httpx.Router
	svc    *trace.Service
}

func setup(t testing.TB) *env {
	t.Helper()
	return setupOn(t, dbtest.SQLite(t))
}

// setupOn is setup on the store d.
func setupOn(t testing.TB, d *db.DB) *env {
	t.Helper()
	return setupWith(t, d, nil)
}

// setupWith is setupOn with heavy as the middleware of the routes that can amplify (nil:
// none).
func setupWith(t testing.TB, d *db.DB, heavy httpx.Middleware) *env {
	t.Helper()
	ctx := context.Background()
	ks := auth.NewSQLStore(d)
	if err := ks.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	keys := auth.NewKeys(ks)
	_, k1, _ := keys.Create(ctx, "ent", "")
	_, k2, _ := keys.Create(ctx, "other", "")
	st := trace.NewSQLStore(d)
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	r := httpx.NewRouter()
	svc := trace.NewService(st)
	api := traceapi.New(svc)
	if heavy != nil {
		api.SetHeavy(heavy)
	}
	basic := httpx.Authenticate(keys, auth.Basic, nil)
	api.Register(r, basic)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer(httpx.Chain(r, httpx.WithRequestID(), httpx.Recover(log), httpx.LimitBody(1<<20)))
	t.Cleanup(srv.Close)
	return &env{srv: srv, key: k1, other: k2, router: r, svc: svc}
}

func (e *env) call(t *testing.T, method, path, key, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("api:"+key)))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func errParam(t *testing.T, body []byte) string {
	t.Helper()
	var env struct {
		Error struct {
			Param *string `json:"param"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		t.Fatalf("not an envelope: %s", body)
	}
	if env.Error.Param == nil {
		return ""
	}
	return *env.Error.Param
}

func TestEveryRouteIsDocumentedAndScoped(t *testing.T) {
	e := setup(t)
	if u := openapi.Undocumented(e.router.Routes()); len(u) > 0 {
		t.Fatalf("undocumented: %v", u)
	}
	// Every POST route answers 401 without credentials and 403 for another entity's project.
	for _, rt := range e.router.Routes() {
		path := strings.NewReplacer("{object_id}", "o", "{digest}", "d", "{entity}", "ent", "{project}", "p").Replace(rt.Path)
		code, _ := e.call(t, rt.Method, path, "", `{}`)
		if code != http.StatusUnauthorized {
			t.Errorf("%s %s without auth: %d", rt.Method, path, code)
		}
		if rt.Method != "POST" && rt.Method != "PUT" {
			continue
		}
		if strings.HasPrefix(path, "/v2/") {
			code, _ := e.call(t, rt.Method, path, e.other, `{}`)
			if code != http.StatusForbidden {
				t.Errorf("%s %s by another entity: %d", rt.Method, path, code)
			}
		}
	}
}

func TestHTTPBehaviour(t *testing.T) {
	e := setup(t)
	// Strict request models: an unknown top-level field is a 400 naming it.
	code, body := e.call(t, "POST", "/objs/query", e.key, `{"project_id":"ent/p","bogus":1}`)
	if code != 400 || errParam(t, body) != "bogus" {
		t.Fatalf("unknown field: %d %s", code, body)
	}
	// Nested insert schemas are lenient.
	code, body = e.call(t, "POST", "/obj/create", e.key, `{"obj":{"project_id":"ent/p","object_id":"o","val":{"a":1},"extra":true}}`)
	if code != 200 {
		t.Fatalf("nested extra field: %d %s", code, body)
	}
	var created trace.ObjCreateRes
	_ = json.Unmarshal(body, &created)
	// Another entity: 403 whether or not the project exists, and nothing leaks.
	for _, p := range []string{"ent/p", "ent/nope"} {
		code, body = e.call(t, "POST", "/obj/read", e.other, `{"project_id":"`+p+`","object_id":"o","digest":"latest"}`)
		if code != 403 || strings.Contains(string(body), `"a"`) {
			t.Fatalf("other entity read of %s: %d %s", p, code, body)
		}
	}
	// Malformed project ids name the field, nested ones by their path.
	code, body = e.call(t, "POST", "/obj/create", e.key, `{"obj":{"project_id":"nodash","object_id":"o","val":1}}`)
	if code != 400 || errParam(t, body) != "obj.project_id" {
		t.Fatalf("bad project: %d %s", code, body)
	}
	// Unknown digest: 404.
	code, _ = e.call(t, "POST", "/table/query", e.key, `{"project_id":"ent/p","digest":"`+strings.Repeat("a", 64)+`"}`)
	if code != 404 {
		t.Fatalf("unknown table: %d", code)
	}
	// Negative limit.
	code, body = e.call(t, "POST", "/objs/query", e.key, `{"project_id":"ent/p","limit":-1}`)
	if code != 400 || errParam(t, body) != "limit" {
		t.Fatalf("negative limit: %d %s", code, body)
	}
	// Too deep a value: 400, and nothing stored.
	deep := strings.Repeat(`{"a":`, 300) + "1" + strings.Repeat("}", 300)
	code, _ = e.call(t, "POST", "/obj/create", e.key, `{"obj":{"project_id":"ent/p","object_id":"deep","val":`+deep+`}}`)
	if code != 400 {
		t.Fatalf("deep value: %d", code)
	}
	code, _ = e.call(t, "POST", "/obj/read", e.key, `{"project_id":"ent/p","object_id":"deep","digest":"latest"}`)
	if code != 404 {
		t.Fatal("a rejected object was stored")
	}
	// Over the body limit: 413.
	code, _ = e.call(t, "POST", "/table/create", e.key, `{"table":{"project_id":"ent/p","rows":[{"x":"`+strings.Repeat("x", 2<<20)+`"}]}}`)
	if code != 413 {
		t.Fatalf("big body: %d", code)
	}
	// Tags and aliases through the REST routes.
	code, body = e.call(t, "PUT", "/objs/o/versions/"+created.Digest+"/tags", e.key, `{"project_id":"ent/p","tags":["t1","t2"]}`)
	if code != 200 {
		t.Fatalf("tags: %d %s", code, body)
	}
	code, _ = e.call(t, "PUT", "/objs/o/aliases", e.key, `{"project_id":"ent/p","digest":"`+created.Digest+`","aliases":["prod"]}`)
	if code != 200 {
		t.Fatalf("aliases: %d", code)
	}
	code, body = e.call(t, "GET", "/tags?project_id=ent/p", e.key, "")
	if code != 200 || string(bytes.TrimSpace(body)) != `{"tags":["t1","t2"]}` {
		t.Fatalf("list tags: %d %s", code, body)
	}
	code, body = e.call(t, "POST", "/objs/query", e.key, `{"project_id":"ent/p","filter":{"aliases":["prod"]},"include_tags_and_aliases":true}`)
	if code != 200 || !strings.Contains(string(body), `"tags":["t1","t2"],"aliases":["latest","prod"]`) {
		t.Fatalf("query by alias: %d %s", code, body)
	}
	code, _ = e.call(t, "POST", "/objs/o/versions/"+created.Digest+"/tags/remove", e.key, `{"project_id":"ent/p","tags":["t1"]}`)
	if code != 200 {
		t.Fatalf("remove tags: %d", code)
	}
	// JSONL stream of calls.
	code, _ = e.call(t, "POST", "/call/start", e.key, `{"start":{"project_id":"ent/p","op_name":"op","started_at":"2026-01-01T00:00:00Z","attributes":{},"inputs":{"a":1}}}`)
	if code != 200 {
		t.Fatalf("call start: %d", code)
	}
	code, body = e.call(t, "POST", "/calls/stream_query", e.key, `{"project_id":"ent/p"}`)
	lines := strings.Split(strings.TrimSpace(string(body)), "\n")
	if code != 200 || len(lines) != 1 || !json.Valid([]byte(lines[0])) || !strings.Contains(lines[0], `"status":"running"`) {
		t.Fatalf("stream_query: %d %s", code, body)
	}
	// Usage over the limit is refused, not truncated.
	code, body = e.call(t, "POST", "/trace/usage", e.key, `{"project_id":"ent/p","limit":0}`)
	if code != 400 || errParam(t, body) != "limit" {
		t.Fatalf("usage limit 0: %d %s", code, body)
	}
}

func TestFilesMultipart(t *testing.T) {
	e := setup(t)
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("project_id", "ent/p")
	fw, _ := mw.CreateFormFile("file", "obj.py")
	_, _ = fw.Write([]byte("print('hi')\n"))
	mw.Close()
	req, _ := http.NewRequest("POST", e.srv.URL+"/file/create", &buf)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("api:"+e.key)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var fc trace.FileCreateRes
	if resp.StatusCode != 200 || json.Unmarshal(body, &fc) != nil || fc.Digest != trace.BytesDigest([]byte("print('hi')\n")) {
		t.Fatalf("file create: %d %s", resp.StatusCode, body)
	}
	code, content := e.call(t, "POST", "/file/content", e.key, `{"project_id":"ent/p","digest":"`+fc.Digest+`"}`)
	if code != 200 || string(content) != "print('hi')\n" {
		t.Fatalf("file content: %d %q", code, content)
	}
	code, _ = e.call(t, "POST", "/file/create", e.key, `{"project_id":"ent/p"}`)
	if code != 400 {
		t.Fatalf("JSON to the multipart route: %d", code)
	}
}

// GET /projects lists the key's entity's projects that hold calls or objects, and nothing of
// another entity (an entity whose name is a prefix of another's included).
func TestProjectsList(t *testing.T) {
	e := setup(t)
	ctx := context.Background()
	start := func(key, project string) {
		t.Helper()
		code, body := e.call(t, "POST", "/call/start", key, `{"start":{"project_id":"`+project+`","id":"c-`+project+`","trace_id":"t","op_name":"op","started_at":"2026-01-01T00:00:00Z","attributes":{},"inputs":{}}}`)
		if code != 200 {
			t.Fatalf("call start %s: %d %s", project, code, body)
		}
	}
	code, body := e.call(t, "GET", "/projects", e.key, "")
	if code != 200 || strings.TrimSpace(string(body)) != `{"projects":[]}` {
		t.Fatalf("empty: %d %s", code, body)
	}
	start(e.key, "ent/b")
	start(e.key, "ent/a")
	start(e.other, "other/x")
	if code, body := e.call(t, "POST", "/obj/create", e.key, `{"obj":{"project_id":"ent/c","object_id":"o","val":1}}`); code != 200 {
		t.Fatalf("obj: %d %s", code, body)
	}
	if _, err := e.svc.ListProjects(ctx, "en"); err != nil { // a prefix of "ent" sees nothing of it
		t.Fatal(err)
	}
	if res, _ := e.svc.ListProjects(ctx, "en"); len(res.Projects) != 0 {
		t.Fatalf("entity en sees %v", res.Projects)
	}
	for key, want := range map[string]string{e.key: `{"projects":["ent/a","ent/b","ent/c"]}`, e.other: `{"projects":["other/x"]}`} {
		if code, body := e.call(t, "GET", "/projects", key, ""); code != 200 || strings.TrimSpace(string(body)) != want {
			t.Errorf("GET /projects: %d %s, want %s", code, body, want)
		}
	}
}
