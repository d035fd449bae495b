package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func init() {
	register("worker", "run training jobs from the store, apart from the API server (takes hone serve's flags)", func(args []string) int {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return runWorker(ctx, args, os.Stdout, os.Stderr, nil)
	})
}

// runWorker is `hone worker`: the serve areas on the same store and models, no listener, at
// least one training worker.
func runWorker(ctx context.Context, args []string, stdout, stderr io.Writer, ready chan<- string) int {
	if _, env := os.LookupEnv(envName("train-workers")); !hasFlag(args, "train-workers") && !env {
		args = append([]string{"--train-workers", "1"}, args...)
	}
	return runServeMode(ctx, args, stdout, stderr, ready, true)
}

func hasFlag(args []string, name string) bool {
	for _, a := range args {
		a = strings.TrimLeft(a, "-")
		if a == name || strings.HasPrefix(a, name+"=") {
			return true
		}
	}
	return false
}
