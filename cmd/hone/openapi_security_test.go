package main

import (
	"encoding/json"
	"regexp"
	"sort"
	"testing"
)

// TestOpenAPISecurityDeclared: every route of /openapi.json that answers 401 without
// credentials declares its security scheme; no authenticated route says `security: []`.
func TestOpenAPISecurityDeclared(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	code, _, body := do(t, "GET", s.url+"/openapi.json", "", "")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Security []map[string][]string `json:"security"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatal(err)
	}
	wild := regexp.MustCompile(`\{[^}]+\}`)
	var bad []string
	n := 0
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if len(op.Security) > 0 {
				continue
			}
			n++
			url := s.url + wild.ReplaceAllString(path, "x")
			code, _, _ := do(t, map[string]string{"get": "GET", "post": "POST", "put": "PUT", "delete": "DELETE", "patch": "PATCH"}[method], url, "", "{}")
			if code == 401 {
				bad = append(bad, method+" "+path)
			}
		}
	}
	sort.Strings(bad)
	if len(bad) > 0 {
		t.Fatalf("%d routes declare no security but answer 401 without credentials: %v", len(bad), bad)
	}
	if n == 0 {
		t.Fatal("no unauthenticated routes found (health, openapi.json)")
	}
}
