package fault

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
)

func TestKinds(t *testing.T) {
	err := fmt.Errorf("creating: %w", Conflict("name", "a model named %s exists", "m"))
	f, ok := As(err)
	if !ok || f.Kind != KindConflict || f.Field != "name" || f.Error() != "a model named m exists" || !Is(err, KindConflict) || Is(err, KindNotFound) {
		t.Fatalf("%+v %v", f, ok)
	}
	if _, ok := As(errors.New("plain")); ok {
		t.Fatal("a plain error is a fault")
	}
}

// TestJSON: decoding errors name the field, under the request field that held the JSON.
func TestJSON(t *testing.T) {
	var v struct {
		LR    *float64 `json:"learning_rate"`
		Inner struct {
			N int `json:"n"`
		} `json:"inner"`
	}
	for _, c := range []struct {
		in, within, field, msg string
	}{
		{`{"learning_rate":"fast"}`, "", "learning_rate", "Invalid type for `learning_rate`: expected number, got string"},
		{`{"learning_rate":"fast"}`, "config", "config.learning_rate", "Invalid type for `config.learning_rate`: expected number, got string"},
		{`{"inner":{"n":true}}`, "", "inner.n", "Invalid type for `inner.n`: expected integer, got bool"},
		{`[1]`, "", "", "Request body must be a JSON object, got array"},
		{`[1]`, "config", "config", "`config` must be a JSON object, got array"},
		{`{"learning_rate":`, "", "", "Malformed JSON body: unexpected end of JSON input (at byte 17)"},
	} {
		f := JSON(json.Unmarshal([]byte(c.in), &v), c.within)
		if f.Kind != KindInvalid || f.Field != c.field || f.Msg != c.msg {
			t.Errorf("%s within %q: %+v", c.in, c.within, f)
		}
	}
	f := JSON(json.Unmarshal([]byte(`{"a":}`), &v), "")
	if f.Field != "" || f.Msg[:len("Malformed JSON body: ")] != "Malformed JSON body: " {
		t.Errorf("syntax: %+v", f)
	}
}
