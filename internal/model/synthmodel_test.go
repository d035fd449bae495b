package model_test

import (
	"testing"

	"github.com/honeai/hone/internal/model"
	"github.com/honeai/hone/internal/synth"
)

// synthModel writes the synthetic model o into a temporary directory and loads it, closed
// when the test ends.
func synthModel(t testing.TB, o synth.Options) *model.Model {
	t.Helper()
	dir := t.TempDir()
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(dir, model.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
