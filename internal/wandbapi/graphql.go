package wandbapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/wandb"
)

// The W&B SDKs (the Weave SDKs before they trace; the wandb SDK when it starts a run and logs
// or fetches an artifact) talk to the W&B GraphQL API at `POST {WANDB_BASE_URL}/graphql`.
// Hone answers the root fields they send (see docs/training-api.md for each operation); a
// query naming any other root field gets a GraphQL error naming it. The query is parsed with
// gqlparser (no schema) and each answer is cut down to what the query selects.

// gqlRequest is a GraphQL request: the query, its variables and the operation to run.
type gqlRequest struct {
	Query         string          `json:"query"`
	Variables     json.RawMessage `json:"variables,omitempty"`
	OperationName string          `json:"operationName,omitempty"`
}

// gqlResponse is a GraphQL answer: each root field's value (null where it failed) and the
// errors, each with the path of the field it belongs to.
type gqlResponse struct {
	Data   map[string]any `json:"data"`
	Errors []gqlError     `json:"errors,omitempty"`
}

// gqlError is one error of a GraphQL answer.
type gqlError struct {
	Message string   `json:"message"`
	Path    []string `json:"path,omitempty"`
}

// gqlCtx is what a root field's answer needs.
type gqlCtx struct {
	ctx    context.Context
	entity string
	base   string // this server's URL as the client reached it
	wb     *wandb.Service
}

// rootFn answers a root field from its arguments (variables already substituted).
type rootFn func(c *gqlCtx, args map[string]any) (any, error)

// wandbRoots are the root fields Hone answers.
var wandbRoots = map[string]rootFn{
	"viewer":                 root(rootViewer),
	"serverInfo":             root(rootServerInfo),
	"entity":                 root(rootEntity),
	"project":                root(rootProject),
	"model":                  root(rootProject), // W&B's older name for a project
	"upsertModel":            root(rootUpsertModel),
	"upsertBucket":           root(rootUpsertBucket),
	"createRunFiles":         root(rootCreateRunFiles),
	"markRunFilesUploaded":   root(rootMarkRunFilesUploaded),
	"createArtifact":         root(rootCreateArtifact),
	"createArtifactManifest": root(rootCreateArtifactManifest),
	"updateArtifactManifest": root(rootUpdateArtifactManifest),
	"createArtifactFiles":    root(rootCreateArtifactFiles),
	"commitArtifact":         root(rootCommitArtifact),
	"useArtifact":            root(rootUseArtifact),
	"updateArtifact":         root(rootUpdateArtifact),
	"artifact":               root(rootArtifact),
	"artifactCollection":     root(rootArtifactCollectionByID),
	"clientIDMapping":        func(*gqlCtx, map[string]any) (any, error) { return nil, nil },
	"organization":           func(*gqlCtx, map[string]any) (any, error) { return nil, nil },
	"deleteArtifact":         root(rootDeleteArtifact),
}

func supportedRoots() string {
	var names []string
	for n := range wandbRoots {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func (a *API) graphql(w http.ResponseWriter, r *http.Request) {
	var req gqlRequest
	if err := httpx.DecodeJSON(r, &req, httpx.DecodeOptions{Text: true}); err != nil {
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
		if err := httpx.CheckText(map[string]any{"variables": vars}); err != nil {
			apierror.Write(w, r, err)
			return
		}
	}
	res := gqlResponse{Data: map[string]any{}}
	doc, op, err := parseOperation(req.Query, req.OperationName)
	if err != nil {
		res.Data = nil
		res.Errors = []gqlError{{Message: err.Error()}}
		httpx.WriteJSON(w, http.StatusOK, res)
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	c := &gqlCtx{ctx: r.Context(), entity: p.Entity, base: scheme + "://" + r.Host, wb: a.wb}
	e := &gqlExec{ctx: r.Context(), doc: doc, vars: withDefaults(op, vars)}
	var roots []*ast.Field
	e.fields(op.SelectionSet, object{}, &roots)
	for _, f := range roots {
		key := f.Alias
		if key == "" {
			key = f.Name
		}
		if f.Name == "__typename" {
			res.Data[key] = "Query"
			if op.Operation == ast.Mutation {
				res.Data[key] = "Mutation"
			}
			continue
		}
		fn := wandbRoots[f.Name]
		if fn == nil {
			res.Data[key] = nil
			e.fail([]string{key}, fmt.Errorf("Hone answers only these W&B GraphQL fields: %s; not %s", supportedRoots(), f.Name))
			continue
		}
		args, err := e.args(f)
		var v any
		if err == nil {
			v, err = fn(c, args)
		}
		if err != nil {
			res.Data[key] = nil
			e.fail([]string{key}, e.public(err))
			continue
		}
		res.Data[key] = e.value(f, v, []string{key})
	}
	res.Errors = e.errs
	httpx.WriteJSON(w, http.StatusOK, res)
}

// clientError is an error whose message the client may see.
type clientError struct{ msg string }

func (e *clientError) Error() string { return e.msg }

// gqlErrorf is an error whose message the client may see.
func gqlErrorf(format string, args ...any) error {
	return &clientError{fmt.Sprintf(format, args...)}
}

// own checks that entity (empty: the key's) is the key's entity.
func (c *gqlCtx) own(entity string) (string, error) {
	if entity == "" || entity == c.entity {
		return c.entity, nil
	}
	return "", gqlErrorf("permission denied: this API key belongs to entity %s, not %s", c.entity, entity)
}

func (c *gqlCtx) store() (*wandb.Service, error) {
	if c.wb == nil {
		return nil, gqlErrorf("this server keeps no W&B runs or artifacts")
	}
	return c.wb, nil
}

// ---- viewer, server, entity, project ----

func rootViewer(c *gqlCtx, _ noArgs) (gqlUser, error) {
	return gqlUser{ID: wandb.GlobalID("User", c.entity), Username: c.entity, Name: c.entity, Entity: c.entity, Flags: "{}",
		DefaultEntity: gqlNodeRef{ID: wandb.GlobalID("Entity", c.entity), Name: c.entity}}, nil
}

func rootServerInfo(c *gqlCtx, _ noArgs) (gqlServerInfo, error) {
	return gqlServerInfo{FrontendHost: c.base}, nil
}

func entityObj(c *gqlCtx, name string) gqlEntity {
	return gqlEntity{ID: wandb.GlobalID("Entity", name), Name: name, ReadOnly: name != c.entity, DefaultAccess: "PRIVATE"}
}

func rootEntity(c *gqlCtx, args entityArgs) (gqlEntity, error) {
	name := args.Name
	if name == "" {
		name = args.EntityName
	}
	if name == "" {
		name = c.entity
	}
	return entityObj(c, name), nil
}

func rootProject(c *gqlCtx, args projectArgs) (*gqlProject, error) {
	entity, err := c.own(args.EntityName)
	if err != nil {
		return nil, err
	}
	name := args.Name
	if name == "" {
		name = "uncategorized"
	}
	p := projectObj(c, entity, name)
	return &p, nil
}

func rootUpsertModel(c *gqlCtx, args inputArgs[upsertModelInput]) (*gqlUpsertModelPayload, error) {
	in := args.Input
	entity, err := c.own(in.EntityName)
	if err != nil {
		return nil, err
	}
	m := projectObj(c, entity, in.Name)
	m.Description = in.Description
	return &gqlUpsertModelPayload{Model: m, Project: m}, nil
}

// projectInfo is a project as an artifact or run names it.
func projectInfo(c *gqlCtx, entity, name string) gqlProjectRef {
	id := wandb.GlobalID("Project", entity+"/"+name)
	return gqlProjectRef{ID: id, InternalID: id, Name: name, EntityName: entity, Entity: entityObj(c, entity)}
}

func projectObj(c *gqlCtx, entity, name string) gqlProject {
	p := gqlProject{gqlProjectRef: projectInfo(c, entity, name)}
	p.Bucket = field(func(args nameArgs) (*gqlRun, error) { return runByName(c, entity, name, args.Name) })
	p.Run = p.Bucket
	// byName finds the artifact the "name" argument (collection:version) names and shapes it
	// with as; an unknown one is null.
	byName := func(as func(*gqlCtx, wandb.Artifact) any) fieldFn {
		return field(func(args nameArgs) (any, error) {
			ws, err := c.store()
			if err != nil {
				return nil, err
			}
			coll, version, _ := strings.Cut(args.Name, ":")
			a, err := ws.ArtifactByName(c.ctx, entity, name, coll, version)
			if errors.Is(err, wandb.ErrNotFound) {
				return nil, nil
			}
			return as(c, a), err
		})
	}
	p.Artifact = byName(func(c *gqlCtx, a wandb.Artifact) any { return artifactObj(c, a) })
	p.ArtifactCollectionMembership = byName(func(c *gqlCtx, a wandb.Artifact) any { return membershipObj(c, a) })
	collection := func(typ string) fieldFn {
		return field(func(args nameArgs) (*gqlArtifactSequence, error) {
			ws, err := c.store()
			if err != nil {
				return nil, err
			}
			t, err := ws.CollectionType(c.ctx, entity, name, args.Name)
			if errors.Is(err, wandb.ErrNotFound) || (err == nil && typ != "" && t != typ) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			s := collectionObj(c, entity, name, args.Name, t)
			return &s, nil
		})
	}
	p.ArtifactCollection = collection("")
	p.ArtifactSequence = collection("")
	p.ArtifactType = field(func(args nameArgs) (gqlArtifactType, error) {
		typ := args.Name
		return gqlArtifactType{ID: wandb.GlobalID("ArtifactType", entity+"/"+name+"/"+typ), Name: typ,
			ArtifactCollection: collection(typ), ArtifactSequence: collection(typ)}, nil
	})
	return p
}
