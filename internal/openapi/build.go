package openapi

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"github.com/invopop/jsonschema"
)

// Route is a registered route and its documentation.
type Route struct {
	Method string
	Path   string // ServeMux path pattern, e.g. /v1/preview/models/{model}
	Op     *Operation
}

// Info is the document's info object.
type Info struct {
	Title       string
	Version     string
	Description string
}

var wildcard = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)(\.\.\.)?\}|\{\$\}`)

// PathTemplate turns a ServeMux pattern path into an OpenAPI path template.
func PathTemplate(p string) string {
	return wildcard.ReplaceAllStringFunc(p, func(m string) string {
		if m == "{$}" {
			return ""
		}
		return "{" + strings.TrimSuffix(strings.Trim(m, "{}"), "...") + "}"
	})
}

// Build returns the OpenAPI 3.1 document of routes. Routes without an Operation are listed
// with no documentation, so that Undocumented can find them.
func Build(info Info, routes []Route) ([]byte, error) {
	r := &jsonschema.Reflector{
		DoNotReference:             false,
		ExpandedStruct:             false,
		AllowAdditionalProperties:  true,
		RequiredFromJSONSchemaTags: false,
	}
	schemas := map[string]any{}
	ref := func(v any) any {
		if v == nil {
			return map[string]any{}
		}
		s := r.Reflect(v)
		for name, def := range s.Definitions {
			schemas[name] = def
		}
		if s.Ref != "" {
			return map[string]any{"$ref": strings.Replace(s.Ref, "#/$defs/", "#/components/schemas/", 1)}
		}
		s.Version = ""
		return s
	}
	paths := map[string]map[string]any{}
	for _, rt := range routes {
		p := PathTemplate(rt.Path)
		if paths[p] == nil {
			paths[p] = map[string]any{}
		}
		method := strings.ToLower(rt.Method)
		if method == "" {
			method = "get"
		}
		op := map[string]any{}
		if rt.Op == nil {
			op["x-undocumented"] = true
			paths[p][method] = op
			continue
		}
		o := rt.Op
		op["summary"] = o.Summary
		if o.Description != "" {
			op["description"] = o.Description
		}
		if len(o.Tags) > 0 {
			op["tags"] = o.Tags
		}
		op["operationId"] = operationID(rt.Method, p)
		switch o.Security {
		case BearerAuth:
			op["security"] = []map[string][]string{{"bearer": {}}}
		case BasicAuth:
			op["security"] = []map[string][]string{{"basic": {}}}
		default:
			op["security"] = []map[string][]string{}
		}
		var params []map[string]any
		for _, name := range pathParams(rt.Path) {
			params = append(params, map[string]any{"name": name, "in": "path", "required": true, "schema": map[string]string{"type": "string"}})
		}
		for _, prm := range o.Params {
			if prm.In == "path" {
				continue
			}
			typ := prm.Type
			if typ == "" {
				typ = "string"
			}
			params = append(params, map[string]any{"name": prm.Name, "in": prm.In, "required": prm.Required,
				"description": prm.Description, "schema": map[string]string{"type": typ}})
		}
		if len(params) > 0 {
			op["parameters"] = params
		}
		if o.Request != nil {
			ct := o.RequestContentType
			if ct == "" {
				ct = "application/json"
			}
			op["requestBody"] = map[string]any{"required": true,
				"content": map[string]any{ct: map[string]any{"schema": ref(o.Request)}}}
		}
		ct := o.ResponseContentType
		if ct == "" {
			ct = "application/json"
		}
		content := map[string]any{ct: map[string]any{"schema": ref(o.Response)}}
		for _, s := range o.Streams {
			content[s] = map[string]any{"schema": map[string]string{"type": "string"}}
		}
		for _, a := range o.Answers {
			var schema any = map[string]string{"type": "string"}
			if a.Schema != nil {
				schema = ref(a.Schema)
				if a.Array {
					schema = map[string]any{"type": "array", "items": schema}
				}
			}
			content[a.Type] = map[string]any{"schema": schema}
		}
		op["responses"] = map[string]any{
			"200":     map[string]any{"description": "Success", "content": content},
			"default": map[string]any{"description": "Error", "content": map[string]any{"application/json": map[string]any{"schema": map[string]string{"$ref": "#/components/schemas/ErrorEnvelope"}}}},
		}
		paths[p][method] = op
	}
	schemas["ErrorEnvelope"] = map[string]any{
		"type":     "object",
		"required": []string{"error"},
		"properties": map[string]any{"error": map[string]any{
			"type":     "object",
			"required": []string{"message", "type", "param", "code"},
			"properties": map[string]any{
				"message": map[string]string{"type": "string"},
				"type":    map[string]string{"type": "string"},
				"param":   map[string]any{"type": []string{"string", "null"}},
				"code":    map[string]string{"type": "integer"},
			},
		}},
	}
	doc := map[string]any{
		"openapi": "3.1.0",
		"info":    map[string]any{"title": info.Title, "version": info.Version, "description": info.Description},
		"paths":   paths,
		"components": map[string]any{
			"schemas": schemas,
			"securitySchemes": map[string]any{
				"bearer": map[string]string{"type": "http", "scheme": "bearer", "description": "Hone API key"},
				"basic":  map[string]string{"type": "http", "scheme": "basic", "description": "Any username; the password is a Hone API key"},
			},
		},
	}
	return json.MarshalIndent(doc, "", "  ")
}

func pathParams(p string) []string {
	var out []string
	for _, m := range wildcard.FindAllStringSubmatch(p, -1) {
		if m[1] != "" {
			out = append(out, m[1])
		}
	}
	return out
}

func operationID(method, path string) string {
	s := strings.ToLower(method) + strings.NewReplacer("/", "_", "{", "", "}", "", "-", "_", ".", "_").Replace(path)
	return strings.TrimSuffix(s, "_")
}

// Undocumented returns "METHOD path" of every route without an Operation or without a summary.
func Undocumented(routes []Route) []string {
	var out []string
	for _, rt := range routes {
		if rt.Op == nil || strings.TrimSpace(rt.Op.Summary) == "" {
			out = append(out, rt.Method+" "+rt.Path)
		}
	}
	sort.Strings(out)
	return out
}
