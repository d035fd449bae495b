package httpx_test

import (
	"context"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/httpx"
)

// memKeys is an in-memory auth.Store.
type memKeys struct {
	mu   sync.Mutex
	keys map[string]auth.Key
	hash map[string][]byte
}

func (m *memKeys) InsertKey(_ context.Context, k auth.Key, hash []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys[k.ID], m.hash[k.ID] = k, hash
	return nil
}

func (m *memKeys) GetKey(_ context.Context, id string) (auth.Key, []byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[id]
	if !ok {
		return auth.Key{}, nil, auth.ErrNotFound
	}
	return k, m.hash[id], nil
}

func (m *memKeys) ListKeys(context.Context, string) ([]auth.Key, error) { return nil, nil }

func (m *memKeys) RevokeKey(_ context.Context, id string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := m.keys[id]
	k.RevokedAt = &at
	m.keys[id] = k
	return nil
}

func (m *memKeys) TouchKey(context.Context, string, time.Time) error { return nil }
func (m *memKeys) CountKeys(context.Context) (int, error)            { return len(m.keys), nil }

// TestAuthenticateAnswers: the Authenticate middleware answers a missing or bad key with a 401
// envelope carrying the scheme's WWW-Authenticate challenge, and lets a good key through with
// its principal; a handler's auth.Entity check without a principal is a 401 without it.
func TestAuthenticateAnswers(t *testing.T) {
	ctx := context.Background()
	keys := auth.NewKeys(&memKeys{keys: map[string]auth.Key{}, hash: map[string][]byte{}})
	_, good, err := keys.Create(ctx, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	rec, revoked, err := keys.Create(ctx, "alice", "")
	if err != nil {
		t.Fatal(err)
	}
	if err := keys.Revoke(ctx, rec.ID); err != nil {
		t.Fatal(err)
	}
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := auth.FromContext(r.Context())
		_, _ = w.Write([]byte(p.Entity))
	})
	const bearerHint = "send 'Authorization: Bearer <API key>'"
	const basicHint = "send 'Authorization: Basic base64(<username>:<API key>)'"
	for _, c := range []struct {
		scheme      auth.Scheme
		authz       string
		status      int
		challenge   string
		msgOrEntity string
	}{
		{auth.Bearer, "", 401, `Bearer realm="hone"`, "Missing API key: " + bearerHint + "."},
		{auth.Basic, "", 401, `Basic realm="hone"`, "Missing API key: " + basicHint + "."},
		{auth.Basic, "Bearer " + good, 401, `Basic realm="hone"`, "Unsupported authorization scheme for this route: " + basicHint + "."},
		{auth.Bearer, "Token x", 401, `Bearer realm="hone"`, "Unsupported authorization scheme for this route: " + bearerHint + "."},
		{auth.Basic, "Basic !!!", 401, `Basic realm="hone"`, "Invalid credentials: malformed Basic credentials: expected base64 of <username>:<api key>."},
		{auth.Bearer, "Bearer a b", 401, `Bearer realm="hone"`, "Invalid credentials: empty API key."},
		{auth.Bearer, "Bearer hone_AAAAAAAAAAAA_" + strings.Repeat("a", 40), 401, `Bearer realm="hone"`, "Invalid API key."},
		{auth.Basic, basic("api", revoked), 401, `Basic realm="hone"`, "This API key has been revoked."},
		{auth.Bearer, "Bearer " + good, 200, "", "alice"},
		{auth.Basic, basic("api", good), 200, "", "alice"},
	} {
		r := httptest.NewRequest("POST", "/", nil)
		if c.authz != "" {
			r.Header.Set("Authorization", c.authz)
		}
		w := httptest.NewRecorder()
		httpx.Authenticate(keys, c.scheme, nil)(ok).ServeHTTP(w, r)
		if w.Code != c.status || w.Header().Get("WWW-Authenticate") != c.challenge {
			t.Errorf("%v %q: %d %q, want %d %q", c.scheme, c.authz, w.Code, w.Header().Get("WWW-Authenticate"), c.status, c.challenge)
			continue
		}
		if c.status == 200 {
			if w.Body.String() != c.msgOrEntity {
				t.Errorf("%v %q: principal %q", c.scheme, c.authz, w.Body)
			}
			continue
		}
		e := checkEnvelope(t, w.Body.Bytes(), 401)
		if e.Type != "AuthenticationError" || e.Message != c.msgOrEntity || e.Param != nil {
			t.Errorf("%v %q: envelope %+v", c.scheme, c.authz, e)
		}
	}

	// Without the middleware there is no principal: auth.Entity is a 401 with no challenge.
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/", nil)
	apierror.Write(w, r, auth.Entity(r.Context(), "alice", "entity"))
	if w.Code != 401 || w.Header().Get("WWW-Authenticate") != "" {
		t.Fatalf("no principal: %d %q", w.Code, w.Header().Get("WWW-Authenticate"))
	}
	if e := checkEnvelope(t, w.Body.Bytes(), 401); e.Type != "AuthenticationError" || e.Message != "authentication required" {
		t.Fatalf("no principal: %+v", e)
	}
}
