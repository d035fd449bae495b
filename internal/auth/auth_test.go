package auth_test

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"testing"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/fault"
)

func newKeys(t *testing.T, d *db.DB) *auth.Keys {
	t.Helper()
	st := auth.NewSQLStore(d)
	if err := st.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	return auth.NewKeys(st)
}

func TestKeyLifecycle(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		keys := newKeys(t, d)
		rec, secret, err := keys.Create(ctx, "alice", "laptop")
		if err != nil {
			t.Fatal(err)
		}
		got, err := keys.Verify(ctx, secret)
		if err != nil || got.ID != rec.ID || got.Entity != "alice" {
			t.Fatalf("verify = %+v, %v", got, err)
		}
		// Wrong secret with a valid id, unknown id, garbage: all invalid.
		bad := []string{secret[:len(secret)-1] + "x", "hone_AAAAAAAAAAAA_" + secret[len(secret)-40:], "nope", ""}
		if secret[len(secret)-1] == 'x' {
			bad[0] = secret[:len(secret)-1] + "y"
		}
		for _, b := range bad {
			if _, err := keys.Verify(ctx, b); !errors.Is(err, auth.ErrInvalidKey) {
				t.Errorf("Verify(%q) = %v, want ErrInvalidKey", b, err)
			}
		}
		list, err := keys.List(ctx, "alice")
		if err != nil || len(list) != 1 || list[0].Name != "laptop" || list[0].LastUsedAt == nil {
			t.Fatalf("list = %+v, %v", list, err)
		}
		if other, _ := keys.List(ctx, "bob"); len(other) != 0 {
			t.Fatalf("bob sees %v", other)
		}
		if err := keys.Revoke(ctx, rec.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := keys.Verify(ctx, secret); !errors.Is(err, auth.ErrRevoked) {
			t.Fatalf("revoked key: %v", err)
		}
		if err := keys.Revoke(ctx, "nosuchkeyid0"); !errors.Is(err, auth.ErrNotFound) {
			t.Fatalf("revoke unknown = %v", err)
		}
		if _, _, err := keys.Create(ctx, "bad/entity", ""); err == nil {
			t.Fatal("invalid entity accepted")
		}
	})
}

func TestParseAuthorization(t *testing.T) {
	b64 := func(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }
	cases := []struct {
		h      string
		scheme auth.Scheme
		key    string
		err    error
	}{
		{"", 0, "", auth.ErrNoCredentials},
		{"Bearer abc", auth.Bearer, "abc", nil},
		{"bearer   abc ", auth.Bearer, "abc", nil},
		{"Bearer", 0, "", auth.ErrBadScheme},
		{"Bearer a b", auth.Bearer, "", auth.ErrEmptyKey},
		{"Basic " + b64("api:k1"), auth.Basic, "k1", nil},
		{"Basic " + b64("anyone:k:with:colons"), auth.Basic, "k:with:colons", nil},
		{"Basic " + base64.RawStdEncoding.EncodeToString([]byte("api:k2x")), auth.Basic, "k2x", nil},
		{"Basic " + b64("nocolon"), auth.Basic, "", auth.ErrBadBasic},
		{"Basic " + b64("api:"), auth.Basic, "", auth.ErrEmptyKey},
		{"Basic !!!", auth.Basic, "", auth.ErrBadBasic},
		{"Token abc", 0, "", auth.ErrBadScheme},
		{"Digest x=y", 0, "", auth.ErrBadScheme},
	}
	for _, c := range cases {
		s, k, err := auth.ParseAuthorization(c.h)
		if s != c.scheme || k != c.key || !errors.Is(err, c.err) {
			t.Errorf("Parse(%q) = %v %q %v; want %v %q %v", c.h, s, k, err, c.scheme, c.key, c.err)
		}
	}
}

func FuzzParseAuthorization(f *testing.F) {
	for _, s := range []string{"", "Bearer x", "Basic YXBpOms=", "Basic ", "basic YTpi", "Bearer \x00", "Basic " + string(make([]byte, 10))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		s, k, err := auth.ParseAuthorization(h)
		if err == nil {
			if k == "" {
				t.Fatalf("no error but empty key for %q", h)
			}
			if s != auth.Bearer && s != auth.Basic {
				t.Fatalf("no error but scheme %v for %q", s, h)
			}
		} else if k != "" {
			t.Fatalf("error %v but key %q", err, k)
		}
	})
}

func TestProjectScoping(t *testing.T) {
	ctx := auth.WithPrincipal(context.Background(), auth.Principal{KeyID: "k", Entity: "a"})
	if e, p, err := auth.Project(ctx, "a/x", "project_id"); err != nil || e != "a" || p != "x" {
		t.Fatalf("own project: %v %v %v", e, p, err)
	}
	for id, status := range map[string]int{
		"b/x": http.StatusForbidden, "b/does-not-exist": http.StatusForbidden,
		"ax": http.StatusBadRequest, "a/": http.StatusBadRequest, "/x": http.StatusBadRequest,
		"a/x/y": http.StatusBadRequest, "": http.StatusBadRequest, "a/ x": http.StatusBadRequest,
		"a b/x": http.StatusBadRequest,
	} {
		_, _, err := auth.Project(ctx, id, "project_id")
		e, ok := apierror.As(err)
		if !ok || e.Status != status {
			t.Errorf("Project(%q) = %v, want status %d", id, err, status)
			continue
		}
		if status == http.StatusBadRequest && e.Param != "project_id" {
			t.Errorf("Project(%q) param = %q", id, e.Param)
		}
	}
	// The 403 for an existing and a missing project of another entity is the same message.
	_, _, e1 := auth.Project(ctx, "b/x", "project_id")
	_, _, e2 := auth.Project(ctx, "b/does-not-exist", "project_id")
	if e1.Error() != e2.Error() {
		t.Errorf("403 messages differ: %q vs %q", e1, e2)
	}
	if _, _, err := auth.Project(context.Background(), "a/x", "project_id"); err == nil {
		t.Fatal("unauthenticated context accepted")
	}
}

// TestAuthenticateFaults: a missing or bad key is a fault.KindUnauthenticated (the HTTP layer
// answers it 401 with the scheme's challenge), never an HTTP error built here.
func TestAuthenticateFaults(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		keys := newKeys(t, d)
		_, secret, err := keys.Create(ctx, "alice", "")
		if err != nil {
			t.Fatal(err)
		}
		for authz, msg := range map[string]string{
			"":                       "Missing API key: send 'Authorization: Bearer <API key>'.",
			"Basic YXBpOms=":         "Unsupported authorization scheme for this route: send 'Authorization: Bearer <API key>'.",
			"Bearer a b":             "Invalid credentials: empty API key.",
			"Bearer " + secret + "x": "Invalid API key.",
		} {
			_, err := keys.Authenticate(ctx, authz, auth.Bearer)
			f, ok := fault.As(err)
			if !ok || f.Kind != fault.KindUnauthenticated || f.Msg != msg || f.Field != "" {
				t.Errorf("%q: %#v", authz, err)
			}
		}
		p, err := keys.Authenticate(ctx, "Bearer "+secret, auth.Bearer)
		if err != nil || p.Entity != "alice" {
			t.Fatalf("good key: %+v %v", p, err)
		}
		if got := auth.Basic.Challenge(); got != `Basic realm="hone"` {
			t.Errorf("challenge %q", got)
		}
	})
}
