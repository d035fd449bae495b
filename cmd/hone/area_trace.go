package main

import (
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/trace"
	"github.com/honeai/hone/internal/traceapi"
)

// TraceService is the name the trace service is provided under, for areas that write traces.
const TraceService = "trace"

func init() {
	registerArea(10, "trace", func(app *App, r *httpx.Router) error {
		store := trace.NewSQLStore(app.DB)
		if err := store.Migrate(app.Context()); err != nil {
			return err
		}
		svc := trace.NewService(store)
		app.Provide(TraceService, svc)
		api := traceapi.New(svc)
		api.Register(r, app.Basic)
		api.RegisterGraphQL(r, app.Basic, app.Bearer)
		return nil
	})
}
