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
		traceapi.New(svc).Register(r, app.Basic)
		return nil
	})
}
