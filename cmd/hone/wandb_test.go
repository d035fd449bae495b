package main

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
)

// wandbGQL posts a GraphQL query with HTTP Basic (as the wandb SDK sends it) and returns the
// data and the errors' messages.
func wandbGQL(t *testing.T, url, key, query string, vars map[string]any) (map[string]any, []string) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	code, _, body := do(t, "POST", url+"/graphql", basic("api", key), string(b))
	var res struct {
		Data   map[string]any `json:"data"`
		Errors []struct {
			Message string `json:"message"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &res); code != 200 || err != nil {
		t.Fatalf("graphql: %d %s", code, body)
	}
	var errs []string
	for _, e := range res.Errors {
		errs = append(errs, e.Message)
	}
	return res.Data, errs
}

// dig follows keys (and list indexes as ints) through decoded JSON.
func dig(v any, path ...any) any {
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

func md5b64(b []byte) string {
	s := md5.Sum(b)
	return base64.StdEncoding.EncodeToString(s[:])
}

func put(t *testing.T, url string, body []byte) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest("PUT", url, bytes.NewReader(body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

const (
	gqlCreateArtifact = `mutation CreateArtifact($input: CreateArtifactInput!) { createArtifact(input: $input) { artifact { id state versionIndex } } }`
	gqlCreateFiles    = `mutation F($input: CreateArtifactFilesInput!) { createArtifactFiles(input: $input) { files { edges { node { storagePath uploadUrl artifact { id } } } } } }`
	gqlCreateManifest = `mutation M($artifactID: ID!, $name: String!, $digest: String!, $entityName: String!, $projectName: String!, $runName: String!, $includeUpload: Boolean!) {
		createArtifactManifest(input: {artifactID: $artifactID, name: $name, digest: $digest, entityName: $entityName, projectName: $projectName, runName: $runName, type: FULL}) {
			artifactManifest { id file { id uploadUrl @include(if: $includeUpload) } } } }`
	gqlCommit = `mutation C($artifactID: ID!) { commitArtifact(input: {artifactID: $artifactID}) { artifact { id digest state versionIndex aliases { alias } } } }`
)

// logArtifact does what the wandb SDK does to log a one-file artifact: create it, upload the
// file and the manifest to the URLs answered, commit. It returns the artifact's id.
func logArtifact(t *testing.T, url, key, entity, project, name, file string, content []byte) string {
	t.Helper()
	data, errs := wandbGQL(t, url, key, gqlCreateArtifact, map[string]any{"input": map[string]any{
		"entityName": entity, "projectName": project, "artifactTypeName": "dataset", "artifactCollectionName": name,
		"digest": md5b64(content), "runName": "r1", "metadata": `{"format":"jsonl"}`,
		"aliases": []any{map[string]any{"alias": "first", "artifactCollectionName": name}}}})
	if errs != nil {
		t.Fatalf("createArtifact: %v", errs)
	}
	id, _ := dig(data, "createArtifact", "artifact", "id").(string)
	if dig(data, "createArtifact", "artifact", "state") == "COMMITTED" {
		return id // deduplicated
	}
	data, errs = wandbGQL(t, url, key, gqlCreateFiles, map[string]any{"input": map[string]any{"storageLayout": "V2",
		"artifactFiles": []any{map[string]any{"artifactID": id, "name": file, "md5": md5b64(content)}}}})
	if errs != nil {
		t.Fatalf("createArtifactFiles: %v", errs)
	}
	if up, ok := dig(data, "createArtifactFiles", "files", "edges", 0, "node", "uploadUrl").(string); ok {
		if code, body := put(t, up, content); code != 200 {
			t.Fatalf("upload: %d %s", code, body)
		}
	}
	manifest, _ := json.Marshal(map[string]any{"version": 1, "storagePolicy": "wandb-storage-policy-v1",
		"storagePolicyConfig": map[string]any{"storageLayout": "V2"},
		"contents":            map[string]any{file: map[string]any{"digest": md5b64(content), "size": len(content), "birthArtifactID": id}}})
	data, errs = wandbGQL(t, url, key, gqlCreateManifest, map[string]any{"artifactID": id, "name": "wandb_manifest.json",
		"digest": "d", "entityName": entity, "projectName": project, "runName": "r1", "includeUpload": true})
	if errs != nil {
		t.Fatalf("createArtifactManifest: %v", errs)
	}
	if code, body := put(t, dig(data, "createArtifactManifest", "artifactManifest", "file", "uploadUrl").(string), manifest); code != 200 {
		t.Fatalf("manifest upload: %d %s", code, body)
	}
	data, errs = wandbGQL(t, url, key, gqlCommit, map[string]any{"artifactID": id})
	if errs != nil || dig(data, "commitArtifact", "artifact", "state") != "COMMITTED" {
		t.Fatalf("commitArtifact: %v %v", data, errs)
	}
	return id
}

// TestWandbArtifactAPI drives Hone's W&B API over HTTP as the wandb SDK does: a run (upsert,
// resume status, file stream), an artifact logged (files and manifest uploaded to the URLs
// GraphQL answers, one larger than the server's body limit), read back by name, alias and
// membership, downloaded by its signed URL and with Basic auth, used as SFT data; and the
// refusals: unknown root fields, another entity's runs, artifacts and files, bad uploads,
// missing artifacts and files.
func TestWandbArtifactAPI(t *testing.T) { forEachFaultStore(t, testWandbArtifactAPI) }

// testWandbArtifactAPI runs on SQLite and on PostgreSQL, where the files are shared blobs.
func testWandbArtifactAPI(t *testing.T, st faultStore) {
	dir := t.TempDir()
	s := startServer(t, dir, append([]string{"--max-body-bytes", "4096"}, st.args...)...)
	key := initialKey(t, dir)
	var out bytes.Buffer
	if c := runKeys(context.Background(), append([]string{"create", "--data", dir, "--entity", "other"}, st.args...), &out, io.Discard); c != 0 {
		t.Fatal("keys create failed")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	otherKey := lines[len(lines)-1]

	// Unknown root fields are named; a query that does not parse is a GraphQL error.
	if _, errs := wandbGQL(t, s.url, key, `{ viewer { username } runs { name } }`, nil); len(errs) != 1 || !strings.Contains(errs[0], "not runs") {
		t.Fatalf("unknown field: %v", errs)
	}
	if _, errs := wandbGQL(t, s.url, key, `{ viewer {`, nil); len(errs) != 1 || !strings.Contains(errs[0], "does not parse") {
		t.Fatalf("bad query: %v", errs)
	}

	// A run: upsert, resume status, file stream, history.
	const upsert = `mutation U($entity: String, $project: String, $name: String, $config: JSONString) {
		upsertBucket(input: {name: $name, modelName: $project, entityName: $entity, config: $config}) { bucket { id name project { name entity { name } } } inserted } }`
	data, errs := wandbGQL(t, s.url, key, upsert, map[string]any{"entity": "local", "project": "p", "name": "r1", "config": `{"lr":{"value":1},"_wandb":{"value":{"t":{"1":[1]},"m":[]}}}`})
	if errs != nil || dig(data, "upsertBucket", "inserted") != true || dig(data, "upsertBucket", "bucket", "project", "entity", "name") != "local" {
		t.Fatalf("upsertBucket: %v %v", data, errs)
	}
	if _, errs := wandbGQL(t, s.url, otherKey, upsert, map[string]any{"entity": "local", "project": "p", "name": "r1"}); len(errs) != 1 || !strings.Contains(errs[0], "permission denied") {
		t.Fatalf("upsertBucket of another entity: %v", errs)
	}
	stream := `{"files":{"wandb-history.jsonl":{"offset":0,"content":["{\"_step\":0,\"loss\":1}","{\"_step\":1,\"loss\":0.5}"]},"wandb-summary.json":{"offset":0,"content":["{\"loss\":0.5}"]}},"complete":true,"exitcode":0}`
	auth := basic("api", key)
	if code, _, body := do(t, "POST", s.url+"/files/local/p/r1/file_stream", auth, stream); code != 200 {
		t.Fatalf("file_stream: %d %s", code, body)
	}
	otherAuth := basic("api", otherKey)
	if code, _, _ := do(t, "POST", s.url+"/files/local/p/r1/file_stream", otherAuth, stream); code != 404 {
		t.Fatalf("file_stream of another entity: %d", code)
	}
	const resume = `query R($project: String, $entity: String, $name: String!) { model(name: $project, entityName: $entity) {
		bucket(name: $name, missingOk: true) { name config summaryMetrics historyLineCount historyTail state history wandbConfig(keys: ["t"]) } } }`
	data, errs = wandbGQL(t, s.url, key, resume, map[string]any{"project": "p", "entity": "local", "name": "r1"})
	if errs != nil || dig(data, "model", "bucket", "historyLineCount") != 2.0 || dig(data, "model", "bucket", "state") != "finished" ||
		dig(data, "model", "bucket", "summaryMetrics") != `{"loss":0.5}` || dig(data, "model", "bucket", "config") != `{"_wandb":{"value":{"t":{"1":[1]},"m":[]}},"lr":{"value":1}}` ||
		dig(data, "model", "bucket", "wandbConfig") != `{"t":{"1":[1]}}` || // the SDK resumes only a run whose wandbConfig holds "t"
		dig(data, "model", "bucket", "historyTail") != `["{\"_step\":1,\"loss\":0.5}"]` {
		t.Fatalf("resume status: %v %v", data, errs)
	}
	if data, _ := wandbGQL(t, s.url, key, resume, map[string]any{"project": "p", "entity": "local", "name": "nope"}); dig(data, "model", "bucket") != nil {
		t.Fatalf("missing run: %v", data)
	}

	// An artifact whose file is larger than the body limit (4096 bytes): streamed to disk.
	var big bytes.Buffer
	for i := 0; big.Len() < 10000; i++ {
		fmt.Fprintf(&big, `{"messages":[{"role":"user","content":"q%d"},{"role":"assistant","content":"a%d"}]}`+"\n", i, i)
	}
	id := logArtifact(t, s.url, key, "local", "p", "data", "train.jsonl", big.Bytes())
	data, _ = wandbGQL(t, s.url, key, gqlCommit, map[string]any{"artifactID": id})
	if dig(data, "commitArtifact", "artifact", "versionIndex") != 0.0 || fmt.Sprint(dig(data, "commitArtifact", "artifact", "aliases")) != "[map[alias:first] map[alias:latest]]" {
		t.Fatalf("committed: %v", data)
	}
	// The same content again is the same version (W&B's digest deduplication).
	if again := logArtifact(t, s.url, key, "local", "p", "data", "train.jsonl", big.Bytes()); again != id {
		t.Fatalf("dedup: %s != %s", again, id)
	}
	// A second version moves latest.
	small := []byte(`{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}` + "\n")
	id2 := logArtifact(t, s.url, key, "local", "p", "data", "train.jsonl", small)

	// Read back by version, alias and latest; files with signed URLs.
	const byName = `query A($e: String!, $p: String!, $n: String!) { project(name: $p, entityName: $e) {
		artifact(name: $n) { id versionIndex size fileCount metadata aliases { alias } artifactType { name }
			files { edges { node { name directUrl } } } currentManifest { file { directUrl } } } } }`
	for name, want := range map[string]string{"data:v0": id, "data:first": id2 /* aliases move to the newest version given them */, "data:latest": id2, "data:v1": id2, "data": id2} {
		data, errs := wandbGQL(t, s.url, key, byName, map[string]any{"e": "local", "p": "p", "n": name})
		if errs != nil || dig(data, "project", "artifact", "id") != want {
			t.Fatalf("artifact %s: %v %v", name, data, errs)
		}
	}
	data, _ = wandbGQL(t, s.url, key, byName, map[string]any{"e": "local", "p": "p", "n": "data:v0"})
	if dig(data, "project", "artifact", "size") != float64(big.Len()) || dig(data, "project", "artifact", "fileCount") != 1.0 ||
		dig(data, "project", "artifact", "metadata") != `{"format":"jsonl"}` {
		t.Fatalf("artifact v0: %v", data)
	}
	fileURL, _ := dig(data, "project", "artifact", "files", "edges", 0, "node", "directUrl").(string)
	code, _, body := do(t, "GET", fileURL, "", "")
	if code != 200 || !bytes.Equal(body, big.Bytes()) {
		t.Fatalf("signed download: %d %d bytes", code, len(body))
	}
	if code, _, _ := do(t, "GET", strings.Replace(fileURL, "sig=", "sig=0", 1), "", ""); code != 403 {
		t.Fatalf("tampered signature: %d", code)
	}
	plain, _, _ := strings.Cut(fileURL, "?")
	if code, _, body := do(t, "GET", plain, auth, ""); code != 200 || !bytes.Equal(body, big.Bytes()) {
		t.Fatalf("download with Basic auth: %d", code)
	}
	if code, _, _ := do(t, "GET", plain, "", ""); code != 401 {
		t.Fatalf("download without credentials: %d", code)
	}
	if code, _, _ := do(t, "GET", plain, otherAuth, ""); code != 404 {
		t.Fatalf("download by another entity: %d", code)
	}
	missing := s.url + "/artifactsV2/default/local/x/0123456789abcdef0123456789abcdef/nope.jsonl"
	if code, _, body := do(t, "GET", missing, auth, ""); code != 404 || !strings.Contains(string(body), "nope.jsonl") {
		t.Fatalf("missing file: %d %s", code, body)
	}
	// Membership files, as wandb.Api().artifact(...).download() asks for them.
	const membership = `query M($e: String!, $p: String!, $c: String!, $a: String!) { project(name: $p, entityName: $e) {
		artifactCollection(name: $c) { __typename artifactMembership(aliasName: $a) { files { pageInfo { __typename hasNextPage } edges { node { __typename name directUrl } } } } } } }`
	data, errs = wandbGQL(t, s.url, key, membership, map[string]any{"e": "local", "p": "p", "c": "data", "a": "v1"})
	if errs != nil || dig(data, "project", "artifactCollection", "artifactMembership", "files", "edges", 0, "node", "name") != "train.jsonl" ||
		dig(data, "project", "artifactCollection", "artifactMembership", "files", "pageInfo", "__typename") != "PageInfo" {
		t.Fatalf("membership files: %v %v", data, errs)
	}
	// Another entity sees nothing of it.
	if _, errs := wandbGQL(t, s.url, otherKey, byName, map[string]any{"e": "local", "p": "p", "n": "data:v0"}); len(errs) != 1 || !strings.Contains(errs[0], "permission denied") {
		t.Fatalf("another entity's artifact: %v", errs)
	}
	if data, _ := wandbGQL(t, s.url, otherKey, `query($id: ID!) { artifact(id: $id) { id } }`, map[string]any{"id": id}); dig(data, "artifact") != nil {
		t.Fatalf("another entity's artifact by id: %v", data)
	}
	if _, errs := wandbGQL(t, s.url, otherKey, gqlCommit, map[string]any{"artifactID": id}); len(errs) != 1 || !strings.Contains(errs[0], "not found") {
		t.Fatalf("commit of another entity's artifact: %v", errs)
	}

	// Uploads: a body whose MD5 differs from the announced one is refused; unknown tokens too.
	data, _ = wandbGQL(t, s.url, key, gqlCreateArtifact, map[string]any{"input": map[string]any{"entityName": "local", "projectName": "p",
		"artifactTypeName": "dataset", "artifactCollectionName": "bad", "digest": "x"}})
	badID := dig(data, "createArtifact", "artifact", "id")
	data, _ = wandbGQL(t, s.url, key, gqlCreateFiles, map[string]any{"input": map[string]any{"storageLayout": "V2",
		"artifactFiles": []any{map[string]any{"artifactID": badID, "name": "train.jsonl", "md5": md5b64([]byte("expected"))}}}})
	up := dig(data, "createArtifactFiles", "files", "edges", 0, "node", "uploadUrl").(string)
	if code, body := put(t, up, []byte("other bytes")); code != 400 || !strings.Contains(string(body), "MD5") {
		t.Fatalf("upload with the wrong MD5: %d %s", code, body)
	}
	if code, _ := put(t, s.url+"/wandb/upload?token=nope", []byte("x")); code != 404 {
		t.Fatalf("unknown upload token: %d", code)
	}
	// Committing before the manifest is uploaded is refused.
	if _, errs := wandbGQL(t, s.url, key, gqlCommit, map[string]any{"artifactID": badID}); len(errs) != 1 || !strings.Contains(errs[0], "manifest") {
		t.Fatalf("commit without manifest: %v", errs)
	}

	// The artifact as SFT data: v0 (the large file), a missing version, another entity.
	bearer := "Bearer " + key
	code, _, body = do(t, "POST", s.url+"/v1/preview/models", bearer, `{"project":"p","name":"m","base_model":"demo"}`)
	model := jsonOf(t, code, body, 200)
	job := func(url string) (int, []byte) {
		code, _, body := do(t, "POST", s.url+"/v1/preview/sft-training-jobs", bearer,
			fmt.Sprintf(`{"model_id":%q,"training_data_url":%q,"config":{"batch_size":8,"learning_rate":0.001}}`, model["id"], url))
		return code, body
	}
	code, body = job("wandb-artifact:///local/p/data:v1")
	j := waitJob(t, s, bearer, jsonOf(t, code, body, 200)["id"].(string))
	if j["status"] != "SUCCEEDED" {
		t.Fatalf("SFT job from an artifact: %v", j)
	}
	if code, body := job("wandb-artifact:///local/p/data:v7"); code != 404 || !strings.Contains(string(body), "local/p/data:v7 not found") {
		t.Fatalf("missing version: %d %s", code, body)
	}
	if code, body := job("wandb-artifact:///local/p/bad:v0"); code != 404 {
		t.Fatalf("uncommitted artifact: %d %s", code, body)
	}
	if code, body := job("wandb-artifact:///other/p/data:v0"); code != 403 {
		t.Fatalf("another entity's artifact: %d %s", code, body)
	}
	if code, body := job("wandb-artifact:///local/data"); code != 400 {
		t.Fatalf("malformed artifact URL: %d %s", code, body)
	}
	// An artifact without train.jsonl is a 404 naming the file.
	logArtifact(t, s.url, key, "local", "p", "notes", "notes.txt", []byte("hello"))
	if code, body := job("wandb-artifact:///local/p/notes:latest"); code != 404 || !strings.Contains(string(body), "has no file train.jsonl") {
		t.Fatalf("artifact without train.jsonl: %d %s", code, body)
	}
}
