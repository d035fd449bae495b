package traceapi

import (
	"fmt"
	"testing"
)

func TestRootFields(t *testing.T) {
	cases := map[string]string{
		"query DefaultEntity { viewer { username defaultEntity { name } } }":                            "[[viewer viewer]]",
		"{ a: project(name: \"x\", entityName: \"y\") { name } serverInfo { frontendHost } }":           "[[a project] [serverInfo serverInfo]]",
		"mutation UpsertModel($name: String!) { upsertModel(input: {name: $name}) { model { name } } }": "[[upsertModel upsertModel]]",
		"query { viewer, serverInfo }": "[[viewer viewer] [serverInfo serverInfo]]",
		"no braces":                    "[]",
	}
	for q, want := range cases {
		if got := fmt.Sprint(rootFields(q)); got != want {
			t.Errorf("rootFields(%q) = %s, want %s", q, got, want)
		}
	}
}

func FuzzRootFields(f *testing.F) {
	f.Add("query { viewer { username } }")
	f.Add("{ a: b(c: {d: [1, 2]}) { e } f }")
	f.Add("{{{{")
	f.Fuzz(func(t *testing.T, q string) {
		for _, fld := range rootFields(q) {
			if fld[0] == "" && fld[1] == "" {
				t.Fatalf("empty field from %q", q)
			}
		}
	})
}
