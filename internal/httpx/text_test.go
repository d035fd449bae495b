package httpx_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/httpx"
)

type textLeaf struct {
	ID   string          `json:"id"`
	Raw  json.RawMessage `json:"raw"`
	Skip string          `json:"-"`
	priv string
}

type textTree struct {
	Name  string              `json:"name"`
	Leaf  *textLeaf           `json:"leaf"`
	List  []textLeaf          `json:"list"`
	Tags  map[string]string   `json:"tags"`
	Any   any                 `json:"any"`
	Next  *textTree           `json:"next"` // recursive
	Bytes []byte              `json:"bytes"`
	Nums  map[string][]int    `json:"nums"`
	Deep  map[string]textLeaf `json:"deep"`
}

// CheckText names the field of the first bad string, at any depth, and passes what only
// holds bad bytes where text is not checked (raw JSON, bytes, skipped and unexported fields).
func TestCheckTextNamesField(t *testing.T) {
	bad := "a\x00b"
	cases := []struct {
		v     textTree
		field string
	}{
		{textTree{Name: bad}, "name"},
		{textTree{Leaf: &textLeaf{ID: bad}}, "leaf.id"},
		{textTree{List: []textLeaf{{}, {ID: "\xff"}}}, "list[1].id"},
		{textTree{Tags: map[string]string{bad: "x"}}, "tags"},
		{textTree{Tags: map[string]string{"k": bad}}, "tags.k"},
		{textTree{Any: map[string]any{"x": []any{bad}}}, "any.x[0]"},
		{textTree{Next: &textTree{Next: &textTree{Name: bad}}}, "next.next.name"},
		{textTree{Deep: map[string]textLeaf{"d": {ID: bad}}}, "deep.d.id"},
	}
	for _, c := range cases {
		err := httpx.CheckText(&c.v)
		var ae *apierror.Error
		if !errors.As(err, &ae) || ae.Param != c.field {
			t.Errorf("%+v: got %v, want a 400 naming %s", c.v, err, c.field)
		}
	}
	ok := textTree{Name: "fine", Leaf: &textLeaf{Raw: json.RawMessage("\"\x00\""), Skip: bad, priv: bad},
		Bytes: []byte(bad), Nums: map[string][]int{"n": {1}}, Next: &textTree{}}
	if err := httpx.CheckText(&ok); err != nil {
		t.Errorf("ok: %v", err)
	}
}
