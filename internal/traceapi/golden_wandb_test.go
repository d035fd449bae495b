package traceapi

import (
	"net/http"
	"testing"

	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/wandb"
)

func newGoldenHandler(t *testing.T, ws *wandb.Service, entity httpx.Middleware) http.Handler {
	r := httpx.NewRouter()
	a := New(nil)
	if ws != nil {
		a.SetWandb(ws)
	}
	a.RegisterGraphQL(r, entity, entity)
	return r
}
