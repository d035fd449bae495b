package wandbapi_test

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/openapi"
	"github.com/honeai/hone/internal/wandb"
	"github.com/honeai/hone/internal/wandbapi"
)

type env struct {
	srv    *httptest.Server
	key    string // entity "ent"
	router *httpx.Router
}

// setup serves the W&B API with a store (or, bare, without one) behind the keys' Basic and
// Bearer authentication.
func setup(t *testing.T, bare bool) *env {
	t.Helper()
	ctx := context.Background()
	d := dbtest.SQLite(t)
	ks := auth.NewSQLStore(d)
	if err := ks.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	keys := auth.NewKeys(ks)
	_, key, _ := keys.Create(ctx, "ent", "")
	var ws *wandb.Service
	if !bare {
		var err error
		if ws, err = wandb.Open(ctx, d, t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	r := httpx.NewRouter()
	wandbapi.New(ws).Register(r, httpx.Authenticate(keys, auth.Basic, nil), httpx.Authenticate(keys, auth.Bearer, nil))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	srv := httptest.NewServer(httpx.Chain(r, httpx.WithRequestID(), httpx.Recover(log), httpx.LimitBody(1<<20)))
	t.Cleanup(srv.Close)
	return &env{srv: srv, key: key, router: r}
}

func (e *env) call(t *testing.T, method, path, authorization, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func basic(key string) string {
	return "Basic " + base64.StdEncoding.EncodeToString([]byte("api:"+key))
}

// TestEveryRouteIsDocumentedAndAuthenticated: every route is in the OpenAPI document, and
// every one but the upload (authorised by the token in its URL) answers 401 without
// credentials. Without a store, only POST /graphql is served.
func TestEveryRouteIsDocumentedAndAuthenticated(t *testing.T) {
	e := setup(t, false)
	if u := openapi.Undocumented(e.router.Routes()); len(u) > 0 {
		t.Fatalf("undocumented: %v", u)
	}
	routes := e.router.Routes()
	if len(routes) != 5 {
		t.Fatalf("routes: %v", routes)
	}
	for _, rt := range routes {
		path := strings.NewReplacer("{entity}", "ent", "{project}", "p", "{run}", "r", "{region}", "default",
			"{artifact}", "a", "{md5}", strings.Repeat("0", 32), "{name...}", "f").Replace(rt.Path)
		code, _ := e.call(t, rt.Method, path, "", `{}`)
		if want := http.StatusUnauthorized; code != want && rt.Path != wandbapi.UploadPath {
			t.Errorf("%s %s without auth: %d", rt.Method, path, code)
		}
	}
	if routes := setup(t, true).router.Routes(); len(routes) != 1 || routes[0].Path != "/graphql" {
		t.Fatalf("routes without a store: %v", routes)
	}
}

// TestGraphQL: the Weave SDKs' viewer query, with either scheme; another entity's project;
// a root field Hone does not answer; a run without a store.
func TestGraphQL(t *testing.T) {
	e := setup(t, false)
	for _, authz := range []string{basic(e.key), "Bearer " + e.key} {
		code, body := e.call(t, "POST", "/graphql", authz, `{"query":"query DefaultEntity { viewer { username defaultEntity { name } } }"}`)
		if code != 200 || !strings.Contains(string(body), `"defaultEntity":{"name":"ent"}`) {
			t.Fatalf("graphql viewer: %d %s", code, body)
		}
	}
	code, body := e.call(t, "POST", "/graphql", basic(e.key), `{"query":"query Project($name: String!, $entityName: String!) { project(name: $name, entityName: $entityName) { name } }","variables":{"name":"p","entityName":"other"}}`)
	if code != 200 || !strings.Contains(string(body), "permission denied") {
		t.Fatalf("graphql other entity: %d %s", code, body)
	}
	code, body = e.call(t, "POST", "/graphql", basic(e.key), `{"query":"{ runs { name } }"}`)
	if !strings.Contains(string(body), "only these W&B GraphQL fields") {
		t.Fatalf("graphql unknown: %d %s", code, body)
	}
	b := setup(t, true)
	code, body = b.call(t, "POST", "/graphql", basic(b.key), `{"query":"{ project(name: \"p\") { name bucket(name: \"r\") { id } } }"}`)
	if code != 200 || !strings.Contains(string(body), `"name":"p"`) || !strings.Contains(string(body), "keeps no W&B runs") {
		t.Fatalf("graphql without a store: %d %s", code, body)
	}
}
