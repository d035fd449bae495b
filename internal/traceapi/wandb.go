package traceapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/openapi"
)

// The Weave SDKs ask the W&B GraphQL API (`POST {WANDB_BASE_URL}/graphql`) who the key
// belongs to and whether a project exists before they trace. Hone answers the handful of
// operations they send, so the SDKs run against Hone with WANDB_BASE_URL pointing at it:
//
//	viewer { username defaultEntity { name } }       the key's entity
//	serverInfo { frontendHost }                      this server
//	project(name, entityName) { name }               any project of the key's entity exists
//	upsertModel(input: {name, entityName}) { model { name description } }
//	entity(name) { ... }                             the key's own entity
//
// It is not a general GraphQL server: a query naming any other root field gets a GraphQL
// error listing what is supported.

type gqlRequest struct {
	Query         string          `json:"query"`
	Variables     json.RawMessage `json:"variables,omitempty"`
	OperationName string          `json:"operationName,omitempty"`
}

type gqlResponse struct {
	Data   map[string]any `json:"data"`
	Errors []gqlError     `json:"errors,omitempty"`
}

type gqlError struct {
	Message string `json:"message"`
}

// rootFields lists the (alias, name) of each field selected at the top of the query's
// operation: `query Name($v: T) { alias: field(args) { ... } other }`.
func rootFields(q string) [][2]string {
	open := strings.IndexByte(q, '{')
	if open < 0 {
		return nil
	}
	body := q[open+1:]
	var out [][2]string
	isIdent := func(c byte, first bool) bool {
		return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (!first && c >= '0' && c <= '9')
	}
	skip := func(i int, openc, closec byte) int {
		depth := 0
		for ; i < len(body); i++ {
			switch body[i] {
			case openc:
				depth++
			case closec:
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	ident := func(i int) (string, int) {
		j := i
		for j < len(body) && isIdent(body[j], j == i) {
			j++
		}
		return body[i:j], j
	}
	space := func(i int) int {
		for i < len(body) && strings.IndexByte(" \n\t\r,", body[i]) >= 0 {
			i++
		}
		return i
	}
	for i := space(0); i < len(body) && body[i] != '}'; i = space(i) {
		if !isIdent(body[i], true) {
			return out // not a plain selection set
		}
		name, j := ident(i)
		alias := name
		if k := space(j); k < len(body) && body[k] == ':' {
			name, j = ident(space(k + 1))
		}
		out = append(out, [2]string{alias, name})
		j = space(j)
		if j < len(body) && body[j] == '(' {
			j = space(skip(j, '(', ')'))
		}
		if j < len(body) && body[j] == '{' {
			j = skip(j, '{', '}')
		}
		i = j
	}
	return out
}

func (a *API) graphql(w http.ResponseWriter, r *http.Request) {
	var req gqlRequest
	if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{}); err != nil {
		apierror.Write(w, r, err)
		return
	}
	p, _ := auth.FromContext(r.Context())
	vars := map[string]any{}
	if len(req.Variables) > 0 && string(req.Variables) != "null" {
		if err := json.Unmarshal(req.Variables, &vars); err != nil {
			apierror.Write(w, r, apierror.BadRequest("variables", "variables must be a JSON object"))
			return
		}
	}
	str := func(k string) string {
		s, _ := vars[k].(string)
		return s
	}
	res := gqlResponse{Data: map[string]any{}}
	fields := rootFields(req.Query)
	if len(fields) == 0 {
		res.Errors = append(res.Errors, gqlError{Message: "could not read the query's fields"})
	}
	for _, f := range fields {
		alias, name := f[0], f[1]
		switch name {
		case "viewer":
			res.Data[alias] = map[string]any{
				"id": p.Entity, "username": p.Entity, "entity": p.Entity,
				"defaultEntity": map[string]any{"id": p.Entity, "name": p.Entity},
				"teams":         map[string]any{"edges": []any{}},
			}
		case "serverInfo":
			res.Data[alias] = map[string]any{"frontendHost": "http://" + r.Host, "latestLocalVersionInfo": nil}
		case "project":
			entity := str("entityName")
			if entity == "" {
				entity = p.Entity
			}
			if entity != p.Entity {
				res.Data[alias] = nil
				res.Errors = append(res.Errors, gqlError{Message: "permission denied: this API key belongs to entity " + p.Entity})
				continue
			}
			res.Data[alias] = map[string]any{"id": entity + "/" + str("name"), "name": str("name"), "entityName": entity}
		case "upsertModel":
			entity := str("entity")
			if entity == "" {
				entity = p.Entity
			}
			if entity != p.Entity {
				res.Data[alias] = nil
				res.Errors = append(res.Errors, gqlError{Message: "permission denied: this API key belongs to entity " + p.Entity})
				continue
			}
			res.Data[alias] = map[string]any{"model": map[string]any{"name": str("name"), "description": vars["description"], "entityName": entity}, "inserted": false}
		case "entity":
			name := str("entityName")
			if name == "" {
				name = str("name")
			}
			res.Data[alias] = map[string]any{"id": name, "name": name, "readOnly": name != p.Entity, "isTeam": false}
		default:
			res.Data[alias] = nil
			res.Errors = append(res.Errors, gqlError{Message: "Hone answers only these W&B GraphQL fields: viewer, serverInfo, project, upsertModel, entity; not " + name})
		}
	}
	httpx.WriteJSON(w, http.StatusOK, res)
}

// RegisterGraphQL adds POST /graphql, accepting either authentication scheme.
func (a *API) RegisterGraphQL(r *httpx.Router, basic, bearer httpx.Middleware) {
	either := func(next http.Handler) http.Handler {
		b, s := basic(next), bearer(next)
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if scheme, _, _ := auth.ParseAuthorization(req.Header.Get("Authorization")); scheme == auth.Bearer {
				s.ServeHTTP(w, req)
				return
			}
			b.ServeHTTP(w, req)
		})
	}
	r.Group(either).HandleFunc("POST /graphql", a.graphql, &openapi.Operation{
		Summary:     "W&B GraphQL subset the Weave SDKs call at start (viewer, project, upsertModel, serverInfo, entity)",
		Tags:        []string{"tracing"},
		Security:    openapi.BasicAuth,
		Request:     gqlRequest{},
		Response:    gqlResponse{},
		Description: "Not a general GraphQL server: only the fields listed are answered.",
	})
}
