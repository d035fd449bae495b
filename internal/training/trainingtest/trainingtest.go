// Package trainingtest builds a training service for the tests of the packages above
// training (its HTTP API, the typed client): a real SQLite store in a temporary directory,
// serving one tiny random model named "tiny", loaded for training only. Package training's
// own tests build theirs beside them (they cannot import this package).
package trainingtest

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/jobs"
	"github.com/honeai/hone/internal/registry"
	"github.com/honeai/hone/internal/serving"
	"github.com/honeai/hone/internal/synth"
	"github.com/honeai/hone/internal/training"
)

// NewService returns the service, its store and files removed when the test ends.
func NewService(t testing.TB) *training.Service {
	t.Helper()
	ctx := context.Background()
	d := dbtest.SQLite(t)
	dir := t.TempDir()
	reg, err := registry.New(ctx, d, filepath.Join(dir, "checkpoints"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := jobs.Open(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	mdir := filepath.Join(dir, "tiny")
	if err := synth.Write(mdir, synth.Tiny("llama")); err != nil {
		t.Fatal(err)
	}
	base, err := serving.Load("tiny", mdir, serving.LoadOptions{NoEngine: true}, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(base.Close)
	models := serving.NewModels()
	models.Add(base)
	return &training.Service{Reg: reg, Queue: q, Models: models, FilesDir: filepath.Join(dir, "files"), DataRoot: t.TempDir()}
}
