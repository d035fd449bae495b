package wandbapi

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/db/dbtest"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/wandb"
)

// newGoldenHandler serves the W&B API over ws (nil: none), entity authenticating requests.
func newGoldenHandler(ws *wandb.Service, entity httpx.Middleware) http.Handler {
	r := httpx.NewRouter()
	New(ws).Register(r, entity, entity)
	return r
}

var update = flag.Bool("update", false, "rewrite testdata/golden.txt")

// goldenNorm replaces what differs from run to run in an answer (random ids, tokens,
// signatures, times, the server's address) with names numbered by first appearance.
type goldenNorm struct {
	base  string
	names map[string]string
}

var (
	hexRun   = regexp.MustCompile(`[0-9a-f]{8,}`)
	timeRun  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	gidShape = regexp.MustCompile(`^[A-Z][A-Za-z]+:`)
)

func (n *goldenNorm) name(kind, s string) string {
	if v, ok := n.names[s]; ok {
		return v
	}
	v := fmt.Sprintf("<%s%d>", kind, len(n.names)+1)
	n.names[s] = v
	return v
}

func (n *goldenNorm) str(s string) string {
	if s == "" {
		return s
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && gidShape.Match(b) {
		typ, key, _ := strings.Cut(string(b), ":")
		parts := strings.Split(key, "/")
		for i, p := range parts {
			parts[i] = n.str(p)
		}
		return "gid(" + typ + ":" + strings.Join(parts, "/") + ")"
	}
	if strings.HasPrefix(s, n.base) {
		u, err := url.Parse(s)
		if err == nil {
			segs := strings.Split(u.EscapedPath(), "/")
			for i, seg := range segs {
				if un, err := url.PathUnescape(seg); err == nil {
					segs[i] = n.str(un)
				}
			}
			q := u.Query()
			var qs []string
			for _, k := range []string{"token", "exp", "sig"} {
				if q.Has(k) {
					v := q.Get(k)
					switch k {
					case "exp":
						v = "<exp>"
					case "sig":
						// A signature covers exp: two signings of one file a second apart
						// differ, so it is not numbered like the stable names.
						v = "<sig>"
					default:
						v = n.str(v)
					}
					qs = append(qs, k+"="+v)
				}
			}
			return "<base>" + strings.Join(segs, "/") + "?" + strings.Join(qs, "&")
		}
	}
	s = timeRun.ReplaceAllString(s, "<time>")
	return hexRun.ReplaceAllStringFunc(s, func(h string) string { return n.name("h", h) })
}

func (n *goldenNorm) value(v any) any {
	switch v := v.(type) {
	case string:
		return n.str(v)
	case []any:
		for i := range v {
			v[i] = n.value(v[i])
		}
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys) // numbered in a stable order
		for _, k := range keys {
			v[k] = n.value(v[k])
		}
	}
	return v
}

// TestWandbGolden drives every root field and route of the W&B API with every field selected
// and compares the answers, made stable, with testdata/golden.txt.
func TestWandbGolden(t *testing.T) {
	d := dbtest.SQLite(t)
	ctx := context.Background()
	ws, err := wandb.Open(ctx, d, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	as := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			e := r.Header.Get("X-Entity")
			if e == "" {
				e = "e1"
			}
			next.ServeHTTP(w, r.WithContext(auth.WithPrincipal(r.Context(), auth.Principal{KeyID: "k", Entity: e})))
		})
	}
	srv := httptest.NewServer(newGoldenHandler(ws, as))
	defer srv.Close()
	bare := httptest.NewServer(newGoldenHandler(nil, as))
	defer bare.Close()
	n := &goldenNorm{base: srv.URL, names: map[string]string{}}
	var out bytes.Buffer

	do := func(base, method, path, entity string, body []byte) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, bytes.NewReader(body))
		if entity != "" {
			req.Header.Set("X-Entity", entity)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	record := func(name string, code int, body []byte) any {
		var v any
		if err := json.Unmarshal(body, &v); err != nil {
			fmt.Fprintf(&out, "### %s\n%d %q\n", name, code, body)
			return nil
		}
		raw := v
		b, _ := json.Marshal(v)
		_ = json.Unmarshal(b, &raw) // a copy to answer with, before normalising
		nv := n.value(v)
		if m, ok := nv.(map[string]any); ok {
			delete(m, "request_id")
		}
		var pretty bytes.Buffer
		enc := json.NewEncoder(&pretty)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", " ")
		_ = enc.Encode(nv)
		fmt.Fprintf(&out, "### %s\n%d %s", name, code, pretty.Bytes())
		return raw
	}
	gqlOn := func(base, name, entity, query string, vars map[string]any) any {
		t.Helper()
		b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
		code, body := do(base, "POST", "/graphql", entity, b)
		return record(name, code, body)
	}
	gql := func(name, query string, vars map[string]any) any { return gqlOn(srv.URL, name, "", query, vars) }
	get := func(v any, path ...any) any {
		for _, p := range path {
			switch p := p.(type) {
			case string:
				m, _ := v.(map[string]any)
				v = m[p]
			case int:
				l, _ := v.([]any)
				if p >= len(l) {
					return nil
				}
				v = l[p]
			}
		}
		return v
	}
	md5b64 := func(b []byte) string { s := md5.Sum(b); return base64.StdEncoding.EncodeToString(s[:]) }
	putURL := func(name, u string, body []byte) {
		t.Helper()
		req, _ := http.NewRequest("PUT", u, bytes.NewReader(body))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		record(name, res.StatusCode, b)
	}
	getURL := func(name, u, entity string) {
		t.Helper()
		req, _ := http.NewRequest("GET", u, nil)
		if entity != "" {
			req.Header.Set("X-Entity", entity)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		record(name, res.StatusCode, b)
	}

	const userSel = `__typename id username name entity email admin flags defaultEntity { id name } teams { edges { node { id } } }`
	const entitySel = `__typename id name readOnly isTeam xxhashDigestsEnabled organization defaultAccess projects { edges { node { id } } }`
	const projInfo = `__typename id internalId name entityName entity { ` + entitySel + ` }`
	const runSel = `__typename id name displayName description notes config summaryMetrics state jobType sweepName group tags
		historyLineCount logLineCount eventsLineCount historyTail eventsTail createdAt heartbeatAt project { ` + projInfo + ` }
		wandbConfig(keys: ["t"]) allConfig: wandbConfig history`
	const pageSel = `pageInfo { __typename hasNextPage endCursor }`
	const fileSel = `edges { node { __typename id name digest md5 sizeBytes mimetype storagePath directUrl url } } totalCount ` + pageSel
	const collSel = `__typename id name description digestAlgorithm createdAt tags { edges { node { id } } } project { id name }
		defaultArtifactType { name } type { name } latestArtifact { id versionIndex }
		artifacts { totalCount edges { cursor version node { id } } ` + pageSel + ` }
		artifactMemberships { totalCount edges { version node { id } } }
		artifactMembership(aliasName: "latest") { id versionIndex artifact { id } }
		aliases { edges { node { alias } } } ... on ArtifactCollection { x: name } ... on ArtifactPortfolio { y: name }`
	const artSel = `__typename id state digest commitHash description metadata versionIndex digestAlgorithm createdAt updatedAt
		ttlDurationSeconds ttlIsInherited historyStep tags { name }
		aliases { __typename id alias artifactCollection { __typename id name project { id name entityName } } }
		artifactType { id name } artifactSequence { id name } artifactCollection { __typename id name latestArtifact { id } }
		sourceCollection { id } artifactMemberships { edges { node { __typename id versionIndex createdAt aliases { alias } artifactCollection { id } artifact { id } } } }
		createdBy { __typename ... on Run { id name project { id name entity { name } } } }
		currentManifest { id file { id directUrl } } size fileCount
		files(names: ["a.txt"]) { ` + fileSel + ` } allFiles: files { edges { node { name } } }
		filesByManifestEntries(entries: [{name: "b.txt"}, "junk"]) { ` + fileSel + ` }`

	gql("viewer", `query Viewer { viewer { `+userSel+` ...U } } fragment U on User { u2: username } fragment X on Entity { name }`, nil)
	gql("viewer other key", `{ viewer { username ... on Entity { name } ... on Node { id } } }`, nil)
	gql("serverInfo", `{ serverInfo { frontendHost latestLocalVersionInfo { x } cliVersionInfo features { name } availableBucketProviders exportBucketInfo { x } } }`, nil)
	gql("entity", `{ a: entity(name: "e1") { `+entitySel+` } b: entity(entityName: "e2") { name readOnly } c: entity { name readOnly } }`, nil)
	gql("project", `query P($e: String, $p: String = "p") { project(entityName: $e, name: $p) { `+projInfo+` readOnly description
		artifactType(name: "dataset") { __typename id name artifactCollection(name: "none") { id } artifactSequence(name: "none") { id } artifactCollections { edges { node { id } } } }
		artifact(name: "none:v0") { id } bucket(name: "none") { id } run(name: "none") { id } } model { name } }`, map[string]any{"e": "e1"})
	gql("project other entity", `{ project(entityName: "e2", name: "p") { id } }`, nil)
	gql("project default", `{ project { name entityName } }`, nil)
	gql("upsertModel", `mutation { upsertModel(input: {entityName: "e1", name: "p", description: "d"}) { inserted model { id name description readOnly } project { name entityName } } }`, nil)
	gql("upsertModel other", `mutation { upsertModel(input: {entityName: "e2", name: "p"}) { inserted } }`, nil)

	upsert := `mutation U($input: UpsertBucketInput!) { upsertBucket(input: $input) { inserted bucket { ` + runSel + ` } } }`
	gql("upsertBucket new", upsert, map[string]any{"input": map[string]any{"entityName": "e1", "modelName": "p", "name": "r1",
		"displayName": "Run one", "jobType": "train", "config": `{"_wandb":{"value":{"t":{"1":[1]},"cli_version":"0.19"}},"lr":{"value":0.1}}`,
		"summaryMetrics": `{"loss":1}`, "state": "running"}})
	gql("upsertBucket again", upsert, map[string]any{"input": map[string]any{"entityName": "e1", "modelName": "p", "name": "r1", "config": `{"bs":{"value":8}}`, "state": 7}})
	gql("upsertBucket other", upsert, map[string]any{"input": map[string]any{"entityName": "e2", "modelName": "p", "name": "r1"}})
	gql("upsertBucket no input", `mutation { upsertBucket(input: "x") { inserted bucket { name project { name } } } }`, nil)

	stream := func(name, path, entity, body string) {
		code, b := do(srv.URL, "POST", path, entity, []byte(body))
		record(name, code, b)
	}
	stream("file_stream", "/files/e1/p/r1/file_stream", "", `{"files":{"wandb-history.jsonl":{"offset":0,"content":["{\"loss\":1}","{\"loss\":0.5}"]},"wandb-summary.json":{"offset":0,"content":["{\"loss\":0.5}"]},"output.log":{"offset":0,"content":["hi"]}},"dropped":0}`)
	stream("file_stream complete", "/files/e1/p/r1/file_stream", "", `{"files":{},"complete":true,"exitcode":0,"uploaded":["a"],"preempting":false}`)
	stream("file_stream new run", "/files/e1/p/r2/file_stream", "", `{"files":{"wandb-history.jsonl":{"offset":0,"content":["{\"a\":1}"]}},"complete":true,"exitcode":1}`)
	stream("file_stream other entity", "/files/e2/p/r1/file_stream", "", `{}`)
	stream("file_stream bad json", "/files/e1/p/r1/file_stream", "", `{"files":`)
	stream("file_stream negative", "/files/e1/p/r1/file_stream", "", `{"files":{"x":{"offset":-1,"content":[]}}}`)
	stream("file_stream not json line", "/files/e1/p/r1/file_stream", "", `{"files":{"wandb-history.jsonl":{"offset":0,"content":["{"]}}}`)
	gql("runs", `{ project(name: "p") { a: bucket(name: "r1") { `+runSel+` } b: run(name: "r2") { state historyTail historyLineCount } } }`, nil)

	files := gql("createRunFiles", `mutation { createRunFiles(input: {entityName: "e1", projectName: "p", runName: "r1", files: ["a.txt", 3, "b.txt"]}) { runID uploadHeaders files { name uploadUrl } } }`, nil)
	if u, ok := get(files, "data", "createRunFiles", "files", 0, "uploadUrl").(string); ok {
		putURL("upload run file", u, []byte("run file"))
		putURL("upload run file again", u, []byte("run file"))
	}
	gql("createRunFiles missing run", `mutation { createRunFiles(input: {entityName: "e1", projectName: "p", runName: "nope", files: ["a"]}) { runID } }`, nil)
	gql("createRunFiles other", `mutation { createRunFiles(input: {entityName: "e2", projectName: "p", runName: "r1", files: ["a"]}) { runID } }`, nil)
	gql("markRunFilesUploaded", `mutation { a: markRunFilesUploaded(input: {entityName: "e1"}) { success } b: markRunFilesUploaded(input: {entityName: "e2"}) { success } }`, nil)

	// An artifact logged as the SDK does.
	contentA, contentB := []byte("file a"), []byte("file b")
	create := `mutation C($input: CreateArtifactInput!) { createArtifact(input: $input) { artifact { ` + artSel + ` } } }`
	createIn := map[string]any{"entityName": "e1", "projectName": "p", "artifactTypeName": "dataset", "artifactCollectionNames": []any{"coll"},
		"digest": "dig1", "description": "first", "metadata": `{"k":1}`, "runName": "r1",
		"aliases": []any{map[string]any{"alias": "best", "artifactCollectionName": "coll"}, "junk", map[string]any{"alias": ""}}}
	created := gql("createArtifact", create, map[string]any{"input": createIn})
	id, _ := get(created, "data", "createArtifact", "artifact", "id").(string)
	fsel := `mutation F($input: CreateArtifactFilesInput!) { createArtifactFiles(input: $input) { files { edges { node { id name storagePath uploadUrl uploadHeaders uploadMultipartUrls artifact { id } } } } } }`
	cf := gql("createArtifactFiles", fsel, map[string]any{"input": map[string]any{"storageLayout": "V2", "artifactFiles": []any{
		map[string]any{"artifactID": id, "name": "a.txt", "md5": md5b64(contentA)}, "junk", nil,
		map[string]any{"artifactID": id, "name": "b.txt", "md5": md5b64(contentB)}}}})
	for i, c := range [][]byte{contentA, contentB} {
		if u, ok := get(cf, "data", "createArtifactFiles", "files", "edges", i, "node", "uploadUrl").(string); ok {
			putURL(fmt.Sprintf("upload file %d", i), u, c)
		}
	}
	gql("createArtifactFiles stored", fsel, map[string]any{"input": map[string]any{"artifactFiles": []any{
		map[string]any{"artifactID": id, "name": "a.txt", "md5": md5b64(contentA)}}}})
	gql("createArtifactFiles bad md5", fsel, map[string]any{"input": map[string]any{"artifactFiles": []any{
		map[string]any{"artifactID": id, "name": "a.txt", "md5": "nope"}}}})
	gql("createArtifactFiles missing artifact", fsel, map[string]any{"input": map[string]any{"artifactFiles": []any{
		map[string]any{"artifactID": "nope", "name": "a.txt", "md5": md5b64(contentA)}}}})
	gql("createArtifactFiles none", fsel, map[string]any{"input": map[string]any{}})
	gql("commit before manifest", `mutation { commitArtifact(input: {artifactID: "`+id+`"}) { artifact { id } } }`, nil)
	manifest, _ := json.Marshal(map[string]any{"version": 1, "storagePolicy": "wandb-storage-policy-v1", "storagePolicyConfig": map[string]any{"storageLayout": "V2"},
		"contents": map[string]any{"a.txt": map[string]any{"digest": md5b64(contentA), "size": len(contentA)}, "b.txt": map[string]any{"digest": md5b64(contentB), "size": len(contentB)}}})
	msel := `mutation M($input: CreateArtifactManifestInput!) { createArtifactManifest(input: $input) { artifactManifest { id file { id uploadUrl uploadHeaders } } } }`
	m := gql("createArtifactManifest", msel, map[string]any{"input": map[string]any{"artifactID": id, "name": "wandb_manifest.json", "digest": "d", "entityName": "e1", "projectName": "p", "runName": "r1", "type": "FULL"}})
	gql("createArtifactManifest other", msel, map[string]any{"input": map[string]any{"artifactID": id, "entityName": "e2"}})
	gql("createArtifactManifest missing", msel, map[string]any{"input": map[string]any{"artifactID": "nope"}})
	mid, _ := get(m, "data", "createArtifactManifest", "artifactManifest", "id").(string)
	um := gql("updateArtifactManifest", `mutation U($id: ID!) { updateArtifactManifest(input: {artifactManifestID: $id, digest: "d"}) { artifactManifest { id file { id uploadUrl } } } }`, map[string]any{"id": mid})
	gql("updateArtifactManifest bad", `mutation { updateArtifactManifest(input: {artifactManifestID: "xx"}) { artifactManifest { id } } }`, nil)
	if u, ok := get(um, "data", "updateArtifactManifest", "artifactManifest", "file", "uploadUrl").(string); ok {
		putURL("upload manifest", u, manifest)
	}
	csel := `mutation C($id: ID!) { commitArtifact(input: {artifactID: $id}) { artifact { ` + artSel + ` } } }`
	committed := gql("commitArtifact", csel, map[string]any{"id": id})
	gql("commitArtifact again", `mutation C($id: ID!) { commitArtifact(input: {artifactID: $id}) { artifact { id state versionIndex } } }`, map[string]any{"id": id})
	gql("createArtifact dedupe", `mutation C($input: CreateArtifactInput!) { createArtifact(input: $input) { artifact { id state versionIndex } } }`, map[string]any{"input": createIn})
	gql("createArtifact no name", `mutation { createArtifact(input: {entityName: "e1", projectName: "p", artifactTypeName: "dataset", digest: "x"}) { artifact { id } } }`, nil)
	gql("createArtifact two names", `mutation { createArtifact(input: {artifactCollectionNames: ["a", "b"], artifactTypeName: "dataset", digest: "x"}) { artifact { id } } }`, nil)
	gql("createArtifact one name", `mutation { createArtifact(input: {artifactCollectionName: "single", projectName: "p", artifactTypeName: "model", digest: "x"}) { artifact { id state artifactType { name } } } }`, nil)
	gql("createArtifact wrong type", `mutation { createArtifact(input: {artifactCollectionName: "coll", projectName: "p", artifactTypeName: "model", digest: "y"}) { artifact { id } } }`, nil)
	gql("createArtifact other", `mutation { createArtifact(input: {entityName: "e2", artifactCollectionName: "c", artifactTypeName: "model", digest: "y"}) { artifact { id } } }`, nil)
	gql("useArtifact", `mutation U($id: ID!) { useArtifact(input: {entityName: "e1", runName: "r1", projectName: "p", artifactID: $id}) { artifact { id state aliases { alias } } } }`, map[string]any{"id": id})
	gql("useArtifact other", `mutation U($id: ID!) { useArtifact(input: {entityName: "e2", artifactID: $id}) { artifact { id } } }`, map[string]any{"id": id})
	gql("updateArtifact", `mutation U($id: ID!) { updateArtifact(input: {artifactID: $id, description: "second", metadata: "{\"k\":2}", aliases: [{alias: "v-best"}, {alias: "prod"}]}) { artifact { id description metadata aliases { alias } } } }`, map[string]any{"id": id})
	gql("updateArtifact keep", `mutation U($id: ID!) { updateArtifact(input: {artifactID: $id, description: 3}) { artifact { id description metadata aliases { alias } } } }`, map[string]any{"id": id})
	gql("artifact", `query A($id: ID!) { artifact(id: $id) { `+artSel+` } none: artifact(id: "nope") { id } }`, map[string]any{"id": id})
	gql("artifact other entity", `query A($id: ID!) { artifact(id: $id) { id } }`, map[string]any{"id": id})
	gqlOn(srv.URL, "artifact as e2", "e2", `query A($id: ID!) { artifact(id: $id) { id } }`, map[string]any{"id": id})
	seqID, _ := get(committed, "data", "commitArtifact", "artifact", "artifactSequence", "id").(string)
	gql("project artifacts", `{ project(name: "p") {
		artifact(name: "coll:v0") { id versionIndex aliases { alias } }
		latest: artifact(name: "coll:latest") { id }
		best: artifact(name: "coll:v-best") { id }
		missing: artifact(name: "coll:v9") { id }
		artifactCollectionMembership(name: "coll:latest") { __typename id versionIndex createdAt aliases { alias } artifactCollection { id name } artifact { id } files { totalCount } }
		noMembership: artifactCollectionMembership(name: "coll:v7") { id }
		artifactCollection(name: "coll") { `+collSel+` }
		artifactSequence(name: "nope") { id }
		artifactType(name: "dataset") { id name artifactCollection(name: "coll") { id name } artifactSequence(name: "coll") { id } }
		model: artifactType(name: "model") { artifactCollection(name: "coll") { id } single: artifactCollection(name: "single") { id } } } }`, nil)
	gql("artifactCollection by id", `query C($id: ID!) { artifactCollection(id: $id) { `+collSel+` } }`, map[string]any{"id": seqID})
	gql("artifactCollection bad id", `{ a: artifactCollection(id: "xx") { id } b: artifactCollection(id: "QXJ0aWZhY3RTZXF1ZW5jZTplMi9wL2NvbGw=") { id } c: artifactCollection(id: "QXJ0aWZhY3RTZXF1ZW5jZTplMS9wL25vbmU=") { id } }`, nil)
	gql("deleteArtifact", `mutation { deleteArtifact(input: {artifactID: "x"}) { artifact { id } } }`, nil)
	gql("null roots", `{ clientIDMapping(clientID: "x") { serverID } organization(id: "x") { id } }`, nil)
	gql("unknown root", `{ viewer { username } runs { id } }`, nil)
	gql("typename", `{ __typename t: __typename }`, nil)
	gql("typename mutation", `mutation { __typename }`, nil)
	gql("object without selection", `{ viewer }`, nil)
	gql("undefined fragment", `{ viewer { ...Nope } }`, nil)
	gql("parse error", `{ viewer {`, nil)
	gql("two operations", `query A { viewer { id } } query B { viewer { name } }`, nil)
	b, _ := json.Marshal(map[string]any{"query": `query A { viewer { id } } query B { viewer { name } }`, "operationName": "B"})
	code, body := do(srv.URL, "POST", "/graphql", "", b)
	record("operationName", code, body)
	b, _ = json.Marshal(map[string]any{"query": `query A { viewer { id } }`, "operationName": "C"})
	code, body = do(srv.URL, "POST", "/graphql", "", b)
	record("operationName missing", code, body)
	code, body = do(srv.URL, "POST", "/graphql", "", []byte(`{"query": "{ viewer { id } }", "variables": [1]}`))
	record("variables not an object", code, body)
	code, body = do(srv.URL, "POST", "/graphql", "", []byte(`{"query": "{ viewer { id } }", "variables": null}`))
	record("variables null", code, body)
	code, body = do(srv.URL, "POST", "/graphql", "", []byte(`{"query": `))
	record("body malformed", code, body)
	code, body = do(srv.URL, "POST", "/graphql", "", []byte(`{"query": "{ viewer { id } }", "variables": {"a": "\u0000"}}`))
	record("variables bad text", code, body)
	gql("bad argument", `query Q($a: String) { entity(name: $a, x: $b) { name } }`, nil)

	// Downloads.
	au, _ := get(committed, "data", "commitArtifact", "artifact", "files", "edges", 0, "node", "directUrl").(string)
	getURL("download signed", au, "")
	getURL("download signed bad", strings.Replace(au, "sig=", "sig=0", 1), "")
	hexA := fmt.Sprintf("%x", md5.Sum(contentA))
	getURL("download v1 authed", srv.URL+"/artifacts/e1/"+hexA, "")
	getURL("download v1 other", srv.URL+"/artifacts/e1/"+hexA, "e2")
	getURL("download v1 missing", srv.URL+"/artifacts/e1/"+strings.Repeat("0", 32), "")
	getURL("download v2 authed", srv.URL+"/artifactsV2/default/e1/x/"+hexA+"/a.txt", "")
	getURL("download v2 other", srv.URL+"/artifactsV2/default/e1/x/"+hexA+"/a.txt", "e2")
	putURL("upload no token", srv.URL+"/wandb/upload", []byte("x"))
	putURL("upload bad token", srv.URL+"/wandb/upload?token=abc", []byte("x"))

	// A server without the W&B store.
	gqlOn(bare.URL, "bare viewer", "", `{ viewer { username } serverInfo { features { name } } }`, nil)
	gqlOn(bare.URL, "bare project", "", `{ project(name: "p") { name bucket(name: "r1") { id } artifact(name: "coll:v0") { id } artifactType(name: "dataset") { artifactCollection(name: "coll") { id } } } }`, nil)
	gqlOn(bare.URL, "bare mutation", "", `mutation { upsertBucket(input: {name: "r"}) { inserted } createArtifact(input: {artifactCollectionName: "c"}) { artifact { id } } artifact(id: "x") { id } }`, nil)
	code, body = do(bare.URL, "POST", "/files/e1/p/r1/file_stream", "", []byte(`{}`))
	record("bare file_stream", code, body)

	got := strings.ReplaceAll(out.String(), bare.URL, "<bare>")
	if *update {
		if err := os.WriteFile("testdata/golden.txt", []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile("testdata/golden.txt")
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		_ = os.WriteFile(os.TempDir()+"/wandb-golden-got.txt", []byte(got), 0o644)
		t.Fatalf("answers differ from testdata/golden.txt (got written to %s/wandb-golden-got.txt)", os.TempDir())
	}
}
