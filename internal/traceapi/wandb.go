package traceapi

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/vektah/gqlparser/v2/ast"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/openapi"
	"github.com/honeai/hone/internal/wandb"
)

// The W&B SDKs (the Weave SDKs before they trace; the wandb SDK when it starts a run and logs
// or fetches an artifact) talk to the W&B GraphQL API at `POST {WANDB_BASE_URL}/graphql`.
// Hone answers the root fields they send (see docs/training-api.md for each operation); a
// query naming any other root field gets a GraphQL error naming it. The query is parsed with
// gqlparser (no schema) and each answer is cut down to what the query selects.

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
	Message string   `json:"message"`
	Path    []string `json:"path,omitempty"`
}

// SetWandb gives the API the W&B run and artifact store (without it, the run and artifact
// operations answer a GraphQL error).
func (a *API) SetWandb(w *wandb.Service) { a.wb = w }

// gqlCtx is what a root field's answer needs.
type gqlCtx struct {
	ctx    context.Context
	entity string
	base   string // this server's URL as the client reached it
	wb     *wandb.Service
}

type rootFn func(c *gqlCtx, args map[string]any) (any, error)

// wandbRoots are the root fields Hone answers.
var wandbRoots = map[string]rootFn{
	"viewer":                 rootViewer,
	"serverInfo":             rootServerInfo,
	"entity":                 rootEntity,
	"project":                rootProject,
	"model":                  rootProject, // W&B's older name for a project
	"upsertModel":            rootUpsertModel,
	"upsertBucket":           rootUpsertBucket,
	"createRunFiles":         rootCreateRunFiles,
	"markRunFilesUploaded":   rootMarkRunFilesUploaded,
	"createArtifact":         rootCreateArtifact,
	"createArtifactManifest": rootCreateArtifactManifest,
	"updateArtifactManifest": rootUpdateArtifactManifest,
	"createArtifactFiles":    rootCreateArtifactFiles,
	"commitArtifact":         rootCommitArtifact,
	"useArtifact":            rootUseArtifact,
	"updateArtifact":         rootUpdateArtifact,
	"artifact":               rootArtifact,
	"artifactCollection":     rootArtifactCollectionByID,
	"clientIDMapping":        func(*gqlCtx, map[string]any) (any, error) { return nil, nil },
	"organization":           func(*gqlCtx, map[string]any) (any, error) { return nil, nil },
	"deleteArtifact":         rootDeleteArtifact,
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
	e.fields(op.SelectionSet, nil, &roots)
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

// ---- argument helpers ----

func argStr(args map[string]any, k string) string {
	s, _ := args[k].(string)
	return s
}

func argObj(args map[string]any, k string) map[string]any {
	m, _ := args[k].(map[string]any)
	if m == nil {
		return map[string]any{}
	}
	return m
}

func argStrs(args map[string]any, k string) []string {
	list, _ := args[k].([]any)
	out := make([]string, 0, len(list))
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
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

func rootViewer(c *gqlCtx, _ map[string]any) (any, error) {
	return obj{"__typename": "User", "id": wandb.GlobalID("User", c.entity), "username": c.entity, "name": c.entity, "entity": c.entity,
		"email": nil, "admin": false, "flags": "{}",
		"defaultEntity": obj{"id": wandb.GlobalID("Entity", c.entity), "name": c.entity},
		"teams":         obj{"edges": []obj{}}}, nil
}

func rootServerInfo(c *gqlCtx, _ map[string]any) (any, error) {
	return obj{"frontendHost": c.base, "latestLocalVersionInfo": nil, "cliVersionInfo": nil, "features": []obj{},
		"availableBucketProviders": []any{}, "exportBucketInfo": nil}, nil
}

func entityObj(c *gqlCtx, name string) obj {
	return obj{"__typename": "Entity", "id": wandb.GlobalID("Entity", name), "name": name, "readOnly": name != c.entity, "isTeam": false,
		"xxhashDigestsEnabled": false, "organization": nil, "defaultAccess": "PRIVATE", "projects": obj{"edges": []obj{}}}
}

func rootEntity(c *gqlCtx, args map[string]any) (any, error) {
	name := argStr(args, "name")
	if name == "" {
		name = argStr(args, "entityName")
	}
	if name == "" {
		name = c.entity
	}
	return entityObj(c, name), nil
}

func rootProject(c *gqlCtx, args map[string]any) (any, error) {
	entity, err := c.own(argStr(args, "entityName"))
	if err != nil {
		return nil, err
	}
	name := argStr(args, "name")
	if name == "" {
		name = "uncategorized"
	}
	return projectObj(c, entity, name), nil
}

// projectInfo is a project as an artifact or run names it.
func projectInfo(c *gqlCtx, entity, name string) obj {
	id := wandb.GlobalID("Project", entity+"/"+name)
	return obj{"__typename": "Project", "id": id, "internalId": id, "name": name, "entityName": entity, "entity": entityObj(c, entity)}
}

func projectObj(c *gqlCtx, entity, name string) obj {
	o := projectInfo(c, entity, name)
	o["readOnly"] = false
	o["bucket"] = fieldFn(func(args map[string]any) (any, error) { return runByName(c, entity, name, argStr(args, "name")) })
	o["run"] = o["bucket"]
	// byName finds the artifact the "name" argument (collection:version)
	// names and shapes it with as; an unknown one is null.
	byName := func(as func(*gqlCtx, wandb.Artifact) obj) fieldFn {
		return func(args map[string]any) (any, error) {
			ws, err := c.store()
			if err != nil {
				return nil, err
			}
			coll, version, _ := strings.Cut(argStr(args, "name"), ":")
			a, err := ws.ArtifactByName(c.ctx, entity, name, coll, version)
			if errors.Is(err, wandb.ErrNotFound) {
				return nil, nil
			}
			return as(c, a), err
		}
	}
	o["artifact"] = byName(artifactObj)
	o["artifactCollectionMembership"] = byName(membershipObj)
	collection := func(typ string) fieldFn {
		return func(args map[string]any) (any, error) {
			ws, err := c.store()
			if err != nil {
				return nil, err
			}
			coll := argStr(args, "name")
			t, err := ws.CollectionType(c.ctx, entity, name, coll)
			if errors.Is(err, wandb.ErrNotFound) || (err == nil && typ != "" && t != typ) {
				return nil, nil
			}
			if err != nil {
				return nil, err
			}
			return collectionObj(c, entity, name, coll, t), nil
		}
	}
	o["artifactCollection"] = collection("")
	o["artifactSequence"] = collection("")
	o["artifactType"] = fieldFn(func(args map[string]any) (any, error) {
		typ := argStr(args, "name")
		return obj{"__typename": "ArtifactType", "id": wandb.GlobalID("ArtifactType", entity+"/"+name+"/"+typ), "name": typ,
			"artifactCollection": collection(typ), "artifactSequence": collection(typ), "artifactCollections": obj{"edges": []obj{}}}, nil
	})
	return o
}

// ---- runs ----

func runByName(c *gqlCtx, entity, project, name string) (any, error) {
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	r, err := ws.Run(c.ctx, entity, project, name)
	if errors.Is(err, wandb.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return runObj(c, r), nil
}

func runObj(c *gqlCtx, r wandb.Run) obj {
	tail := "[]"
	if r.HistoryLines > 0 {
		if lines, err := c.wb.History(c.ctx, r.Entity, r.Project, r.Name); err == nil && len(lines) > 0 {
			b, _ := json.Marshal(lines[len(lines)-1:])
			tail = string(b)
		}
	}
	return obj{"__typename": "Run", "id": r.ID, "name": r.Name, "displayName": r.DisplayName, "description": "", "notes": nil,
		"config": r.Config, "summaryMetrics": r.Summary, "state": r.State, "jobType": r.JobType, "sweepName": nil, "group": nil,
		"tags": []any{}, "historyLineCount": r.HistoryLines, "logLineCount": 0, "eventsLineCount": 0,
		"historyTail": tail, "eventsTail": "[]", "createdAt": db.FormatTime(r.CreatedAt), "heartbeatAt": db.FormatTime(r.CreatedAt),
		"project":     projectInfo(c, r.Entity, r.Project),
		"wandbConfig": fieldFn(func(args map[string]any) (any, error) { return wandbConfig(r.Config, argStrs(args, "keys")), nil }),
		"history": fieldFn(func(map[string]any) (any, error) { // every line, as JSON strings
			lines, err := c.wb.History(c.ctx, r.Entity, r.Project, r.Name)
			if lines == nil {
				lines = []string{}
			}
			return lines, err
		})}
}

// wandbConfig is the SDK's own part of a run's config (`_wandb`), limited to keys when given,
// as a JSON string. The SDK resumes a run only when it holds "t" (the run has started).
func wandbConfig(config string, keys []string) string {
	var c struct {
		W struct {
			Value map[string]json.RawMessage `json:"value"`
		} `json:"_wandb"`
	}
	_ = json.Unmarshal([]byte(config), &c)
	out := map[string]json.RawMessage{}
	for k, v := range c.W.Value {
		if len(keys) == 0 || slices.Contains(keys, k) {
			out[k] = v
		}
	}
	b, _ := json.Marshal(out)
	return string(b)
}

func rootUpsertBucket(c *gqlCtx, args map[string]any) (any, error) {
	in := argObj(args, "input")
	entity, err := c.own(argStr(in, "entityName"))
	if err != nil {
		return nil, err
	}
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	run, inserted, err := ws.UpsertRun(c.ctx, entity, argStr(in, "modelName"), argStr(in, "name"), wandb.RunInput{
		DisplayName: argStr(in, "displayName"), JobType: argStr(in, "jobType"), Config: argStr(in, "config"),
		Summary: argStr(in, "summaryMetrics"), State: argStr(in, "state")})
	if err != nil {
		return nil, err
	}
	return obj{"bucket": runObj(c, run), "inserted": inserted}, nil
}

func rootCreateRunFiles(c *gqlCtx, args map[string]any) (any, error) {
	in := argObj(args, "input")
	entity, err := c.own(argStr(in, "entityName"))
	if err != nil {
		return nil, err
	}
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	project, run := argStr(in, "projectName"), argStr(in, "runName")
	r, err := ws.Run(c.ctx, entity, project, run)
	if err != nil {
		return nil, gqlErrorf("run %s/%s/%s not found", entity, project, run)
	}
	names := argStrs(in, "files")
	ups := make([]wandb.Upload, len(names))
	for i, name := range names {
		ups[i] = wandb.Upload{Entity: entity, Kind: wandb.UploadRunFile, Project: project, Run: run, Name: name}
	}
	tokens, err := ws.NewUploads(c.ctx, ups) // one statement per batch, not one per file
	if err != nil {
		return nil, err
	}
	files := make([]obj, len(names))
	for i, name := range names {
		files[i] = obj{"name": name, "uploadUrl": c.uploadURL(tokens[i])}
	}
	return obj{"runID": r.ID, "uploadHeaders": []any{}, "files": files}, nil
}

func rootMarkRunFilesUploaded(c *gqlCtx, args map[string]any) (any, error) {
	if _, err := c.own(argStr(argObj(args, "input"), "entityName")); err != nil {
		return nil, err
	}
	return obj{"success": true}, nil
}

// ---- artifacts ----

// uploadURL is the URL a PUT stores an upload at; the token rides in the query, which the
// access log leaves out.
func (c *gqlCtx) uploadURL(token string) string {
	return c.base + "/wandb/upload?token=" + token
}

// fileURL is where an artifact's file is downloaded (W&B's storage layout V2 path), signed so
// that it works without credentials for a while, as W&B's direct URLs do; the signature rides
// in the query, which the access log leaves out.
func (c *gqlCtx) fileURL(entity, artifactID, md5hex, name string) string {
	exp, sig := c.wb.SignDownload(entity, md5hex)
	return fmt.Sprintf("%s/artifactsV2/default/%s/%s/%s/%s?exp=%d&sig=%s", c.base, url.PathEscape(entity), url.PathEscape(artifactID), md5hex, url.PathEscape(name), exp, sig)
}

func collectionObj(c *gqlCtx, entity, project, name, typ string) obj {
	o := obj{"__typename": "ArtifactSequence", "id": wandb.GlobalID("ArtifactSequence", entity+"/"+project+"/"+name), "name": name,
		"description": nil, "digestAlgorithm": "MANIFEST_MD5", "createdAt": nil, "tags": obj{"edges": []obj{}},
		"project":             projectInfo(c, entity, project),
		"defaultArtifactType": obj{"name": typ}, "type": obj{"name": typ}}
	latest := fieldFn(func(map[string]any) (any, error) {
		a, err := c.wb.ArtifactByName(c.ctx, entity, project, name, "latest")
		if errors.Is(err, wandb.ErrNotFound) {
			return nil, nil
		}
		return artifactObj(c, a), err
	})
	o["latestArtifact"] = latest
	versions := fieldFn(func(map[string]any) (any, error) {
		as, err := c.wb.Versions(c.ctx, entity, project, name, "")
		if err != nil {
			return nil, err
		}
		edges := make([]obj, len(as))
		for i, a := range as {
			edges[i] = obj{"node": artifactObj(c, a), "cursor": a.ID, "version": a.Version()}
		}
		return obj{"totalCount": len(as), "edges": edges, "pageInfo": obj{"__typename": "PageInfo", "hasNextPage": false, "endCursor": nil}}, nil
	})
	o["artifactMembership"] = fieldFn(func(args map[string]any) (any, error) {
		a, err := c.wb.ArtifactByName(c.ctx, entity, project, name, argStr(args, "aliasName"))
		if errors.Is(err, wandb.ErrNotFound) {
			return nil, nil
		}
		return membershipObj(c, a), err
	})
	o["artifacts"] = versions
	o["artifactMemberships"] = versions
	o["aliases"] = obj{"edges": []obj{}}
	return o
}

func artifactObj(c *gqlCtx, a wandb.Artifact) obj {
	var meta any = a.Metadata
	aliases := make([]obj, len(a.Aliases))
	for i, al := range a.Aliases {
		aliases[i] = obj{"__typename": "ArtifactAlias", "id": wandb.GlobalID("ArtifactAlias", a.ID+"/"+al), "alias": al, "artifactCollection": obj{
			"__typename": "ArtifactSequence", "id": a.SequenceID(), "name": a.Collection,
			"project": projectInfo(c, a.Entity, a.Project)}}
	}
	var versionIndex any
	if a.VersionIndex >= 0 {
		versionIndex = a.VersionIndex
	}
	seq := collectionObj(c, a.Entity, a.Project, a.Collection, a.Type)
	o := obj{"__typename": "Artifact", "id": a.ID, "state": a.State, "digest": a.Digest, "commitHash": a.Digest,
		"description": a.Description, "metadata": meta, "versionIndex": versionIndex, "digestAlgorithm": "MANIFEST_MD5",
		"createdAt": db.FormatTime(a.CreatedAt), "updatedAt": db.FormatTime(a.UpdatedAt),
		"ttlDurationSeconds": -1, "ttlIsInherited": true, "historyStep": nil, "tags": []obj{},
		"aliases": aliases, "artifactType": obj{"id": wandb.GlobalID("ArtifactType", a.Entity+"/"+a.Project+"/"+a.Type), "name": a.Type},
		"artifactSequence": seq, "artifactCollection": seq, "sourceCollection": seq,
		"artifactMemberships": fieldFn(func(map[string]any) (any, error) {
			return obj{"edges": []obj{{"node": membershipObj(c, a)}}}, nil
		}),
		"createdBy": obj{"__typename": "Run", "id": wandb.GlobalID("Run", a.Entity+"/"+a.Project+"/"+a.RunName), "name": a.RunName,
			"project": projectInfo(c, a.Entity, a.Project)},
	}
	o["currentManifest"] = fieldFn(func(map[string]any) (any, error) {
		if a.ManifestMD5 == "" {
			return nil, nil
		}
		return obj{"id": wandb.GlobalID("ArtifactManifest", a.ID), "file": obj{"id": wandb.GlobalID("File", a.ID+"/wandb_manifest.json"),
			"directUrl": c.fileURL(a.Entity, a.ID, a.ManifestMD5, "wandb_manifest.json")}}, nil
	})
	counts := func(size bool) fieldFn {
		return func(map[string]any) (any, error) {
			m, err := c.wb.Manifest(c.ctx, a)
			if err != nil {
				return 0, nil // not uploaded yet
			}
			if size {
				return m.Size(), nil
			}
			return len(m.Contents), nil
		}
	}
	o["size"], o["fileCount"] = counts(true), counts(false)
	files := func(args map[string]any) (any, error) {
		m, err := c.wb.Manifest(c.ctx, a)
		if err != nil {
			return nil, gqlErrorf("artifact %s: its manifest is missing", a.Collection)
		}
		want := map[string]bool{}
		for _, n := range argStrs(args, "names") {
			want[n] = true
		}
		for _, e := range argList(args, "entries") {
			if n, ok := e["name"].(string); ok {
				want[n] = true
			}
		}
		names := make([]string, 0, len(m.Contents))
		for n := range m.Contents {
			if len(want) == 0 || want[n] {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		edges := make([]obj, len(names))
		for i, n := range names {
			e := m.Contents[n]
			hexd := wandb.MD5Hex(e.Digest)
			edges[i] = obj{"node": obj{"__typename": "File", "id": wandb.GlobalID("File", a.ID+"/"+n), "name": n, "digest": hexd, "md5": e.Digest,
				"sizeBytes": e.Size, "mimetype": nil, "storagePath": nil, "directUrl": c.fileURL(a.Entity, a.ID, hexd, n), "url": c.fileURL(a.Entity, a.ID, hexd, n)}}
		}
		return obj{"edges": edges, "pageInfo": obj{"__typename": "PageInfo", "hasNextPage": false, "endCursor": nil}, "totalCount": len(names)}, nil
	}
	o["files"] = fieldFn(files)
	o["filesByManifestEntries"] = fieldFn(files)
	return o
}

// membershipObj is an artifact version as a member of its collection (W&B links a version
// into other collections too; Hone's versions belong to their own collection only).
func membershipObj(c *gqlCtx, a wandb.Artifact) obj {
	o := artifactObj(c, a)
	return obj{"__typename": "ArtifactCollectionMembership", "id": a.ID, "versionIndex": o["versionIndex"], "createdAt": o["createdAt"],
		"aliases": o["aliases"], "artifactCollection": o["artifactCollection"], "artifact": o, "files": o["files"]}
}

func argList(args map[string]any, k string) []map[string]any {
	list, _ := args[k].([]any)
	var out []map[string]any
	for _, v := range list {
		if m, ok := v.(map[string]any); ok {
			out = append(out, m)
		}
	}
	return out
}

func (c *gqlCtx) artifact(id string) (wandb.Artifact, error) {
	ws, err := c.store()
	if err != nil {
		return wandb.Artifact{}, err
	}
	a, err := ws.ArtifactByID(c.ctx, c.entity, id)
	if errors.Is(err, wandb.ErrNotFound) {
		return a, gqlErrorf("artifact %s not found", id)
	}
	return a, err
}

func rootArtifact(c *gqlCtx, args map[string]any) (any, error) {
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	a, err := ws.ArtifactByID(c.ctx, c.entity, argStr(args, "id"))
	if errors.Is(err, wandb.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return artifactObj(c, a), nil
}

func rootArtifactCollectionByID(c *gqlCtx, args map[string]any) (any, error) {
	raw, err := base64.StdEncoding.DecodeString(argStr(args, "id"))
	key, ok := strings.CutPrefix(string(raw), "ArtifactSequence:")
	parts := strings.Split(key, "/")
	if err != nil || !ok || len(parts) != 3 || parts[0] != c.entity {
		return nil, nil
	}
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	t, err := ws.CollectionType(c.ctx, parts[0], parts[1], parts[2])
	if err != nil {
		return nil, nil
	}
	return collectionObj(c, parts[0], parts[1], parts[2], t), nil
}

func rootCreateArtifact(c *gqlCtx, args map[string]any) (any, error) {
	in := argObj(args, "input")
	entity, err := c.own(argStr(in, "entityName"))
	if err != nil {
		return nil, err
	}
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	names := argStrs(in, "artifactCollectionNames")
	if n := argStr(in, "artifactCollectionName"); n != "" && len(names) == 0 {
		names = []string{n}
	}
	if len(names) != 1 {
		return nil, gqlErrorf("createArtifact: give the artifact's name (artifactCollectionName)")
	}
	var aliases []string
	for _, al := range argList(in, "aliases") {
		if s, _ := al["alias"].(string); s != "" {
			aliases = append(aliases, s)
		}
	}
	a, err := ws.CreateArtifact(c.ctx, wandb.CreateInput{Entity: entity, Project: argStr(in, "projectName"), Type: argStr(in, "artifactTypeName"),
		Collection: names[0], Digest: argStr(in, "digest"), Description: argStr(in, "description"), Metadata: argStr(in, "metadata"),
		RunName: argStr(in, "runName"), Aliases: aliases})
	if err != nil {
		return nil, err
	}
	return obj{"artifact": artifactObj(c, a)}, nil
}

func manifestPayload(c *gqlCtx, a wandb.Artifact) (any, error) {
	token, err := c.wb.NewUpload(c.ctx, wandb.Upload{Entity: a.Entity, Kind: wandb.UploadManifest, ArtifactID: a.ID})
	if err != nil {
		return nil, err
	}
	return obj{"artifactManifest": obj{"id": wandb.GlobalID("ArtifactManifest", a.ID), "file": obj{
		"id": wandb.GlobalID("File", a.ID+"/wandb_manifest.json"), "uploadUrl": c.uploadURL(token), "uploadHeaders": []any{}}}}, nil
}

func rootCreateArtifactManifest(c *gqlCtx, args map[string]any) (any, error) {
	in := argObj(args, "input")
	if _, err := c.own(argStr(in, "entityName")); err != nil {
		return nil, err
	}
	a, err := c.artifact(argStr(in, "artifactID"))
	if err != nil {
		return nil, err
	}
	return manifestPayload(c, a)
}

func rootUpdateArtifactManifest(c *gqlCtx, args map[string]any) (any, error) {
	in := argObj(args, "input")
	raw, _ := base64.StdEncoding.DecodeString(argStr(in, "artifactManifestID"))
	id, ok := strings.CutPrefix(string(raw), "ArtifactManifest:")
	if !ok {
		return nil, gqlErrorf("artifact manifest %s not found", argStr(in, "artifactManifestID"))
	}
	a, err := c.artifact(id)
	if err != nil {
		return nil, err
	}
	return manifestPayload(c, a)
}

func rootCreateArtifactFiles(c *gqlCtx, args map[string]any) (any, error) {
	in := argObj(args, "input")
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	var edges []obj
	for _, f := range argList(in, "artifactFiles") {
		id, _ := f["artifactID"].(string)
		name, _ := f["name"].(string)
		sum, _ := f["md5"].(string)
		a, err := c.artifact(id)
		if err != nil {
			return nil, err
		}
		hexd := wandb.MD5Hex(sum)
		if hexd == "" {
			return nil, gqlErrorf("createArtifactFiles: file %s: md5 %q is not a base64 MD5", name, sum)
		}
		var upload any
		if _, err := ws.BlobPath(a.Entity, hexd); err != nil { // not stored yet
			token, err := ws.NewUpload(c.ctx, wandb.Upload{Entity: a.Entity, Kind: wandb.UploadFile, ArtifactID: a.ID, MD5: sum})
			if err != nil {
				return nil, err
			}
			upload = c.uploadURL(token)
		}
		edges = append(edges, obj{"node": obj{"id": wandb.GlobalID("File", a.ID+"/"+name), "name": name,
			"storagePath": a.Entity + "/" + hexd, "uploadUrl": upload, "uploadHeaders": []any{}, "uploadMultipartUrls": nil,
			"artifact": obj{"id": a.ID}}})
	}
	return obj{"files": obj{"edges": edges}}, nil
}

func rootCommitArtifact(c *gqlCtx, args map[string]any) (any, error) {
	a, err := c.artifact(argStr(argObj(args, "input"), "artifactID"))
	if err != nil {
		return nil, err
	}
	a, err = c.wb.CommitArtifact(c.ctx, a.Entity, a.ID)
	if err != nil {
		return nil, err
	}
	return obj{"artifact": artifactObj(c, a)}, nil
}

func rootUseArtifact(c *gqlCtx, args map[string]any) (any, error) {
	in := argObj(args, "input")
	if _, err := c.own(argStr(in, "entityName")); err != nil {
		return nil, err
	}
	a, err := c.artifact(argStr(in, "artifactID"))
	if err != nil {
		return nil, err
	}
	return obj{"artifact": artifactObj(c, a)}, nil
}

func rootUpdateArtifact(c *gqlCtx, args map[string]any) (any, error) {
	in := argObj(args, "input")
	a, err := c.artifact(argStr(in, "artifactID"))
	if err != nil {
		return nil, err
	}
	var metadata, description *string
	if s, ok := in["metadata"].(string); ok {
		metadata = &s
	}
	if s, ok := in["description"].(string); ok {
		description = &s
	}
	var aliases []string
	for _, al := range argList(in, "aliases") {
		if s, _ := al["alias"].(string); s != "" {
			aliases = append(aliases, s)
		}
	}
	a, err = c.wb.UpdateArtifact(c.ctx, a.Entity, a.ID, metadata, description, aliases)
	if err != nil {
		return nil, err
	}
	return obj{"artifact": artifactObj(c, a)}, nil
}

func rootDeleteArtifact(c *gqlCtx, args map[string]any) (any, error) {
	return nil, gqlErrorf("deleteArtifact: Hone does not delete W&B artifacts")
}

// ---- routes ----

// RegisterGraphQL adds POST /graphql (either authentication scheme) and, with a W&B store, the
// routes the wandb SDK uses beside it: the file stream of a run, artifact uploads (PUT to the
// URL createArtifactFiles answered, authorised by its token) and downloads.
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
	r.Group(either, httpx.CheckParams()).HandleFunc("POST /graphql", a.graphql, &openapi.Operation{
		Summary:     "W&B GraphQL subset the Weave and wandb SDKs call (viewer, projects, runs, artifacts)",
		Tags:        []string{"tracing"},
		Security:    openapi.BasicAuth,
		Request:     gqlRequest{},
		Response:    gqlResponse{},
		Description: "Not a general GraphQL server: only the root fields listed in docs/training-api.md are answered; any other is a GraphQL error naming it.",
	})
	if a.wb == nil {
		return
	}
	g := r.Group(either, httpx.CheckParams())
	g.HandleFunc("POST /files/{entity}/{project}/{run}/file_stream", a.fileStream, &openapi.Operation{
		Summary: "W&B run file stream: history lines, summary, completion", Tags: []string{"tracing"}, Security: openapi.BasicAuth,
		Request: fileStreamReq{}, Response: map[string]any{}})
	authed := either(http.HandlerFunc(a.downloadBlob))
	download := func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Query().Has("sig") {
			a.downloadBlob(w, req)
			return
		}
		authed.ServeHTTP(w, req)
	}
	r.HandleFunc("GET /artifactsV2/{region}/{entity}/{artifact}/{md5}/{name...}", download, &openapi.Operation{
		Summary: "Download a W&B artifact file (storage layout V2): HTTP Basic, or the signed URL GraphQL answered", Tags: []string{"tracing"}, Security: openapi.BasicAuth})
	r.HandleFunc("GET /artifacts/{entity}/{md5}", download, &openapi.Operation{
		Summary: "Download a W&B artifact file by its MD5 (storage layout V1): HTTP Basic, or a signed URL", Tags: []string{"tracing"}, Security: openapi.BasicAuth})
	r.HandleFunc("PUT "+UploadPath, a.upload, &openapi.Operation{
		Summary: "Store an upload announced by createArtifactFiles, createArtifactManifest or createRunFiles (token in the query; streamed to disk, up to --max-upload-size and the entity's --entity-quota)",
		Tags:    []string{"tracing"}})
}

// UploadPath is the path of upload URLs; its bodies are streamed to disk and not held to the
// server's request-body limit.
const UploadPath = "/wandb/upload"

type fileStreamReq struct {
	Files    map[string]wandb.StreamChunk `json:"files"`
	Complete bool                         `json:"complete"`
	ExitCode *int                         `json:"exitcode"`
	Dropped  int                          `json:"dropped,omitempty"`
	Uploaded []string                     `json:"uploaded,omitempty"`
	Preempt  bool                         `json:"preempting,omitempty"`
}

func (a *API) fileStream(w http.ResponseWriter, r *http.Request) {
	p, _ := auth.FromContext(r.Context())
	entity := r.PathValue("entity")
	if entity != p.Entity {
		apierror.Write(w, r, apierror.NotFound("entity", "run %s/%s/%s not found", entity, r.PathValue("project"), r.PathValue("run")))
		return
	}
	body, err := httpx.ReadBody(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	var req fileStreamReq
	if err := json.Unmarshal(body, &req); err != nil {
		apierror.Write(w, r, apierror.BadRequest("", "Malformed JSON body: %v", err))
		return
	}
	code := 0
	if req.ExitCode != nil {
		code = *req.ExitCode
	}
	if err := a.wb.Stream(r.Context(), entity, r.PathValue("project"), r.PathValue("run"), req.Files, req.Complete, code); err != nil {
		apierror.Write(w, r, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{})
}

func (a *API) upload(w http.ResponseWriter, r *http.Request) {
	token := r.URL.Query().Get("token")
	if token == "" {
		apierror.Write(w, r, apierror.BadRequest("token", "the upload URL has no token"))
		return
	}
	if err := a.wb.PutUploadSized(r.Context(), token, r.Body, r.Header.Get("Content-MD5"), r.ContentLength); err != nil {
		apierror.Write(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (a *API) downloadBlob(w http.ResponseWriter, r *http.Request) {
	entity, md5hex, name := r.PathValue("entity"), r.PathValue("md5"), r.PathValue("name")
	if name == "" {
		name = md5hex
	}
	allowed := false
	if q := r.URL.Query(); q.Has("sig") {
		exp, _ := strconv.ParseInt(q.Get("exp"), 10, 64)
		if !a.wb.VerifyDownload(entity, md5hex, exp, q.Get("sig")) {
			apierror.Write(w, r, apierror.Forbidden("sig", "this download URL's signature is not valid or has expired; ask GraphQL for a new one"))
			return
		}
		allowed = true
	} else if p, ok := auth.FromContext(r.Context()); ok && p.Entity == entity {
		allowed = true
	}
	path := ""
	var err error = wandb.ErrNotFound
	if allowed {
		path, err = a.wb.BlobPath(entity, md5hex)
	}
	if err != nil {
		apierror.Write(w, r, apierror.NotFound("", "artifact file %s (%s) not found", name, md5hex))
		return
	}
	f, err := os.Open(path)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, "", st.ModTime(), f)
}

func rootUpsertModel(c *gqlCtx, args map[string]any) (any, error) {
	in := argObj(args, "input")
	entity, err := c.own(argStr(in, "entityName"))
	if err != nil {
		return nil, err
	}
	name := argStr(in, "name")
	m := projectObj(c, entity, name)
	m["description"] = in["description"]
	return obj{"model": m, "project": m, "inserted": false}, nil
}
