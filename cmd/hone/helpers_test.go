package main

import (
	"io"
	"log/slog"

	"github.com/honeai/hone/internal/health"
)

func newTestLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newChecksForTest() *health.Checks { return health.NewChecks() }
