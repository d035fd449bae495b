package auth_test

import (
	"context"
	"encoding/base64"
	"testing"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/fault"
)

func TestAuthenticateAny(t *testing.T) {
	dbtest.ForEachDialect(t, func(t *testing.T, d *db.DB) {
		ctx := context.Background()
		keys := newKeys(t, d)
		_, secret, err := keys.Create(ctx, "alice", "")
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range [][2]string{{secret, ""}, {" " + secret + " ", "Bearer nope"}, {"", "Bearer " + secret},
			{"", "Basic " + base64.StdEncoding.EncodeToString([]byte("api:"+secret))}} {
			p, err := keys.AuthenticateAny(ctx, c[0], c[1])
			if err != nil || p.Entity != "alice" {
				t.Errorf("%q %q: %+v %v", c[0], c[1], p, err)
			}
		}
		for _, c := range [][2]string{{"", ""}, {"nope", ""}, {"a b", ""}, {secret + "x", "Bearer " + secret}, {"", "Digest x"}, {"", "Basic !!"}} {
			_, err := keys.AuthenticateAny(ctx, c[0], c[1])
			if !fault.Is(err, fault.KindUnauthenticated) {
				t.Errorf("%q %q: %v", c[0], c[1], err)
			}
		}
	})
}
