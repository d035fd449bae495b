package httpx

import (
	"testing"

	"github.com/honeai/hone/internal/apierror"
)

type embeddedInner struct {
	Temperature *float64 `json:"temperature"`
	Options     *struct {
		Usage *bool `json:"include_usage"`
	} `json:"stream_options"`
}

type embeddingOuter struct {
	embeddedInner
	Name string `json:"name"`
}

// TestDecodeErrorNamesEmbeddedFields: a type error in a field promoted from an embedded
// struct names the field as the body does, not with the Go name of the embedded struct.
func TestDecodeErrorNamesEmbeddedFields(t *testing.T) {
	for body, want := range map[string]string{
		`{"temperature":"hot"}`:                    "temperature",
		`{"stream_options":{"include_usage":"x"}}`: "stream_options.include_usage",
		`{"name":3}`: "name",
	} {
		var v embeddingOuter
		err := Unmarshal([]byte(body), &v, DecodeOptions{})
		ae, ok := apierror.As(err)
		if !ok || ae.Param != want {
			t.Errorf("%s: %v (param %q), want %q", body, err, func() string {
				if ae != nil {
					return ae.Param
				}
				return ""
			}(), want)
		}
	}
}
