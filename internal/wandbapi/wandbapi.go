// Package wandbapi serves the W&B-compatible API over internal/wandb: the subset of W&B's
// GraphQL API that the Weave SDKs (viewer, before they trace) and the wandb SDK (runs and
// artifacts) call, a run's file stream, and the upload and download routes of artifact and
// run files. GraphQL and the file stream authenticate with HTTP Basic (the wandb SDK's way) or
// Bearer; an upload is authorised by the token in its URL, a download by Basic auth or the
// signature of the URL GraphQL answered. Every route acts for the key's entity only.
//
// GraphQL answers are typed (schema.go) and cut down to the query's selection by a small
// executor (exec.go); the arguments are decoded into W&B's input types (args.go).
//
//	api := wandbapi.New(wb) // wb nil: GraphQL answers only the Weave SDKs' fields
//	api.Register(r, basic, bearer)
package wandbapi

import (
	"encoding/json"
	"net/http"
	"os"
	"strconv"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/openapi"
	"github.com/honeai/hone/internal/wandb"
)

// API is the W&B area.
type API struct {
	wb *wandb.Service // W&B runs and artifacts; nil: GraphQL answers only the Weave SDKs' fields
}

// New returns the W&B area over the run and artifact store wb (nil: no runs or artifacts; the
// run and artifact operations answer a GraphQL error and only POST /graphql is registered).
func New(wb *wandb.Service) *API { return &API{wb: wb} }

// UploadPath is the path of upload URLs; its bodies are streamed to disk and not held to the
// server's request-body limit.
const UploadPath = "/wandb/upload"

// Register adds POST /graphql (either authentication scheme) and, with a W&B store, the
// routes the wandb SDK uses beside it: the file stream of a run, artifact uploads (PUT to the
// URL createArtifactFiles answered, authorised by its token) and downloads.
func (a *API) Register(r *httpx.Router, basic, bearer httpx.Middleware) {
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

// fileStreamReq is a file-stream request of the wandb SDK.
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
