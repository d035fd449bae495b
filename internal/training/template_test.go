package training

import (
	"context"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/serving"
)

// TestCreateModelNeedsATemplate: a model cannot be created on a base model without a chat
// template (which training renders data with); the refusal names base_model and the flag that
// gives one, and nothing is created.
func TestCreateModelNeedsATemplate(t *testing.T) {
	s := newService(t)
	ctx := context.Background()
	tiny, _ := s.Models.Get("tiny")
	// A Served not made by serving.Load (which gives every model a template or refuses it).
	s.Models.Add(&serving.Served{Name: "bare", Dir: tiny.Dir, Model: tiny.Model, Tok: tiny.Tok})
	_, err := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "bare"})
	faultOf(t, err, fault.KindInvalid, "base_model")
	if !strings.Contains(err.Error(), "--chat-template bare=FILE") {
		t.Fatalf("err = %v", err)
	}
	if list, _ := s.Reg.List(ctx, "e"); len(list) != 0 {
		t.Fatalf("a model was created: %v", list)
	}
	if _, err := s.CreateModel(ctx, NewModel{Entity: "e", Project: "p", Name: "m", BaseModel: "tiny"}); err != nil {
		t.Fatal(err)
	}
}
