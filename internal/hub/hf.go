package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// The Hugging Face Hub, as huggingface_hub speaks to it:
//
//	GET  {endpoint}/api/models/{repo}/revision/{rev}?blobs=true   the commit and its files (size, git blob id, LFS sha256)
//	HEAD {endpoint}/{repo}/resolve/{commit}/{file}                X-Repo-Commit, ETag or X-Linked-Etag (the blob's id:
//	                                                               git SHA-1, or the LFS SHA-256), X-Linked-Size, and for
//	                                                               LFS files a redirect (Location) to where the bytes are
//	GET  the location, with Range                                 the bytes
//
// Errors carry X-Error-Code (RepoNotFound, RevisionNotFound, EntryNotFound, GatedRepo) and
// X-Error-Message. The cache is huggingface_hub's: models--OWNER--REPO/blobs/{etag},
// snapshots/{commit}/{file} (a relative symlink to the blob) and refs/{revision} (the commit).

// hfFiles are the files of a safetensors model Hone reads (or keeps for an export), beside
// the weights: the config, the tokenizer, the chat template and the generation defaults.
var hfFiles = []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
	"special_tokens_map.json", "tokenizer.model", "added_tokens.json", "chat_template.jinja", "chat_template.json"}

const (
	hfIndex  = "model.safetensors.index.json"
	hfSingle = "model.safetensors"
)

// sibling is a file of a revision, as the revision API lists it.
type sibling struct {
	Name   string `json:"rfilename"`
	Size   int64  `json:"size"`
	BlobID string `json:"blobId"`
	LFS    *struct {
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
	} `json:"lfs"`
}

func (s sibling) size() int64 {
	if s.LFS != nil && s.LFS.Size > 0 {
		return s.LFS.Size
	}
	return s.Size
}

type revisionInfo struct {
	ID       string    `json:"id"`
	SHA      string    `json:"sha"`
	Gated    any       `json:"gated"`
	Siblings []sibling `json:"siblings"`
}

// repoFolder is the cache folder of a repository, as huggingface_hub names it.
func repoFolder(repo string) string { return "models--" + strings.ReplaceAll(repo, "/", "--") }

func (c *Client) repoURL(r Ref) string { return c.HFEndpoint + "/" + r.Repo }

// pullHF pulls an hf: reference.
func (c *Client) pullHF(ctx context.Context, r Ref) (_ Model, err error) {
	if c.Offline || c.HFOffline {
		if m, ok := c.cachedHF(r); ok {
			return m, nil
		}
		env := "HF_HUB_OFFLINE"
		if c.Offline {
			env = "HONE_OFFLINE"
		}
		return Model{}, errorf(ErrOffline, "%s is not in the cache (%s, or huggingface_hub's %s) and %s is set: unset it to download the model, or pull it where the network is reachable and copy the cache", r, c.hfDir(), c.HFCache, env)
	}
	rctx, cancel := context.WithTimeout(ctx, revisionTimeout)
	info, err := c.revision(rctx, r)
	cancel()
	if err != nil {
		if unreachable(err) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			if m, ok := c.cachedHF(r); ok {
				m.Notes = append(m.Notes, fmt.Sprintf("%s could not be reached (%v): the cached copy at commit %s is used", c.HFEndpoint, rootCause(err), short(m.Revision)))
				c.log().Warn("the hub is unreachable; using the cached copy", "ref", r.String(), "commit", m.Revision, "err", err)
				return m, nil
			}
			return Model{}, fmt.Errorf("cannot reach %s to pull %s: %w (check the network and proxy variables, or HF_ENDPOINT; HF_HUB_OFFLINE=1 uses the cache only)", c.HFEndpoint, r, rootCause(err))
		}
		return Model{}, err
	}
	repoDir := filepath.Join(c.hfDir(), repoFolder(r.Repo))
	defer c.dropFailed(repoDir, &err)()
	plan, err := c.planHF(ctx, r, info)
	if err != nil {
		return Model{}, err
	}
	// Already whole in a cache (Hone's, or huggingface_hub's)?
	for _, root := range c.hfRoots() {
		snap := filepath.Join(root.dir, repoFolder(r.Repo), "snapshots", info.SHA)
		if plan.presentIn(snap) {
			m := plan.model(r, info.SHA, snap, root.name, c.repoURL(r))
			if root.name == "hone" {
				if err := c.writeRef(r, info.SHA); err != nil {
					return Model{}, err
				}
			}
			return m, nil
		}
	}
	if err := c.markPull(repoDir, r); err != nil {
		return Model{}, err
	}
	downloaded, err := c.fetchHF(ctx, r, info.SHA, plan, repoDir)
	if err != nil {
		return Model{}, err
	}
	if err := plan.link(repoDir, info.SHA); err != nil {
		return Model{}, err
	}
	if err := c.writeRef(r, info.SHA); err != nil {
		return Model{}, err
	}
	os.Remove(filepath.Join(repoDir, pullMarker))
	m := plan.model(r, info.SHA, filepath.Join(repoDir, "snapshots", info.SHA), "hone", c.repoURL(r))
	m.Downloaded = downloaded
	return m, nil
}

// revisionTimeout bounds the question of which commit a revision is at (retries included):
// a hub that does not answer in time is treated as unreachable, so that a cached model
// still serves.
var revisionTimeout = 30 * time.Second

// revision asks the hub for a revision's commit and files.
func (c *Client) revision(ctx context.Context, r Ref) (*revisionInfo, error) {
	u := fmt.Sprintf("%s/api/models/%s/revision/%s?blobs=true", c.HFEndpoint, r.Repo, url.PathEscape(r.Revision))
	resp, err := c.request(ctx, "GET", u, nil, true)
	if err != nil {
		var se *statusError
		if errors.As(err, &se) {
			return nil, c.explainHF(r, "")(se)
		}
		return nil, err
	}
	defer resp.Body.Close()
	var info revisionInfo
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		return nil, fmt.Errorf("%s: reading the hub's answer for revision %s: %w", r, r.Revision, err)
	}
	if !isCommit(info.SHA) {
		return nil, fmt.Errorf("%s: the hub's answer for revision %s names no commit (sha %q)", r, r.Revision, info.SHA)
	}
	return &info, nil
}

// explainHF turns the hub's error answer into what to do about it (file: the file asked
// for, "" for the revision).
func (c *Client) explainHF(r Ref, file string) func(*statusError) error {
	return func(se *statusError) error {
		page := c.repoURL(r)
		switch {
		case se.errorCode == "GatedRepo":
			if c.HFToken == "" {
				return errorf(ErrAccess, "%s is a gated repository: sign in at %s, accept its licence there, then set HF_TOKEN to a token of that account (%s/settings/tokens) and pull again", r, page, c.HFEndpoint)
			}
			return errorf(ErrAccess, "%s is a gated repository and the token in HF_TOKEN has no access to it yet: accept its licence at %s with the token's account (some repositories wait for the authors' approval), or set HF_TOKEN to a token of an account that has access", r, page)
		case se.message == "Access to this resource is disabled.":
			return errorf(ErrAccess, "%s is disabled on %s: its files cannot be downloaded", r, c.HFEndpoint)
		case se.code == http.StatusUnauthorized && strings.Contains(se.message, "Invalid credentials"):
			return errorf(ErrAccess, "%s refused the token in HF_TOKEN as invalid: create a new one at %s/settings/tokens, or unset HF_TOKEN for public repositories", c.HFEndpoint, c.HFEndpoint)
		case se.errorCode == "RevisionNotFound":
			return errorf(ErrNotFound, "%s has no revision %q: give a branch, tag or commit hash that exists (%s/tree/main shows the branches)", r.Repo, r.Revision, page)
		case se.errorCode == "EntryNotFound" || (file != "" && se.code == http.StatusNotFound):
			return errorf(ErrNotFound, "%s at revision %s has no file %s", r.Repo, r.Revision, file)
		case se.errorCode == "RepoNotFound" || se.code == http.StatusUnauthorized || se.code == http.StatusNotFound:
			if c.HFToken == "" {
				return errorf(ErrNotFound, "no repository %s on %s: check the name (OWNER/REPO as in its URL); a private repository needs HF_TOKEN set to a token that can read it", r.Repo, c.HFEndpoint)
			}
			return errorf(ErrNotFound, "no repository %s on %s that the token in HF_TOKEN can read: check the name (OWNER/REPO as in its URL) and the token's access", r.Repo, c.HFEndpoint)
		case se.code == http.StatusForbidden:
			return errorf(ErrAccess, "%s refused access to %s (403%s): a private or restricted repository needs HF_TOKEN set to a token with read access", c.HFEndpoint, r.Repo, suffix(se.message))
		}
		return fmt.Errorf("%s: %w", r, se)
	}
}

func suffix(msg string) string {
	if msg == "" {
		return ""
	}
	return ": " + msg
}

// hfPlan is what a pull takes from a revision.
type hfPlan struct {
	files []sibling         // the files to have, in the order to fetch them
	gguf  string            // the GGUF file the reference names or picks; "" for a directory
	blob  map[string]string // file → its blob's name (ETag), once fetched
	notes []string
}

func (p *hfPlan) bytes() int64 {
	var n int64
	for _, f := range p.files {
		n += f.size()
	}
	return n
}

// presentIn reports whether snap has every file of the plan.
func (p *hfPlan) presentIn(snap string) bool {
	for _, f := range p.files {
		if _, err := os.Stat(filepath.Join(snap, filepath.FromSlash(f.Name))); err != nil {
			return false
		}
	}
	return len(p.files) > 0
}

func (p *hfPlan) model(r Ref, commit, snap, cache, origin string) Model {
	m := Model{Ref: r, Path: snap, Revision: commit, Cache: cache, Origin: origin, Files: len(p.files), Bytes: p.bytes(), Notes: p.notes}
	if p.gguf != "" {
		m.Path = filepath.Join(snap, filepath.FromSlash(p.gguf))
	}
	return m
}

// planHF picks the files of r from a revision: one GGUF file, or the safetensors model (its
// config, tokenizer and template files and the shards its index names).
func (c *Client) planHF(ctx context.Context, r Ref, info *revisionInfo) (*hfPlan, error) {
	byName := map[string]sibling{}
	var ggufs []string
	for _, s := range info.Siblings {
		byName[s.Name] = s
		if strings.HasSuffix(strings.ToLower(s.Name), ".gguf") && !strings.Contains(strings.ToLower(path.Base(s.Name)), "mmproj") {
			ggufs = append(ggufs, s.Name)
		}
	}
	sort.Strings(ggufs)
	at := r.Repo + "@" + r.Revision
	plan, err := c.pickHF(ctx, r, info, byName, ggufs, at)
	if err != nil {
		return nil, err
	}
	for _, f := range plan.files {
		if !safePath(f.Name) {
			return nil, fmt.Errorf("%s: the hub lists a file named %q, which cannot be a path in the cache", at, f.Name)
		}
	}
	return plan, nil
}

// safePath reports whether a repository's file name stays inside a snapshot.
func safePath(name string) bool {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") || strings.ContainsRune(name, 0) {
		return false
	}
	for _, p := range strings.Split(name, "/") {
		if p == "" || p == "." || p == ".." {
			return false
		}
	}
	return true
}

// pickHF chooses the plan's files (planHF checks their names).
func (c *Client) pickHF(ctx context.Context, r Ref, info *revisionInfo, byName map[string]sibling, ggufs []string, at string) (*hfPlan, error) {
	switch {
	case r.File != "":
		s, ok := byName[r.File]
		if !ok {
			return nil, errorf(ErrNotFound, "%s has no file %s; its GGUF files: %s", at, r.File, listOrNone(ggufs))
		}
		return &hfPlan{files: []sibling{s}, gguf: r.File}, nil
	case r.Quant != "":
		name, err := pickQuant(at, r.Quant, ggufs)
		if err != nil {
			return nil, err
		}
		return &hfPlan{files: []sibling{byName[name]}, gguf: name}, nil
	}
	_, single := byName[hfSingle]
	_, sharded := byName[hfIndex]
	if !single && !sharded {
		if len(ggufs) > 0 {
			name := defaultQuant(ggufs)
			p := &hfPlan{files: []sibling{byName[name]}, gguf: name}
			if len(ggufs) > 1 {
				p.notes = append(p.notes, fmt.Sprintf("%s has no safetensors model and %d GGUF files: took %s (as llama.cpp's -hf does, Q4_K_M when there is one); name another with hf:%s:QUANT or hf:%s/FILE.gguf (%s)",
					r.Repo, len(ggufs), name, r.Repo, r.Repo, strings.Join(ggufs, ", ")))
			}
			return p, nil
		}
		return nil, noWeights(at, info.Siblings)
	}
	p := &hfPlan{}
	if _, ok := byName["config.json"]; !ok {
		return nil, errorf(ErrNoWeights, "%s has safetensors weights but no config.json, which Hone needs to know the model's shape: it is not a transformers model directory", at)
	}
	if _, ok := byName["tokenizer.json"]; !ok {
		return nil, errorf(ErrNoWeights, "%s has no tokenizer.json (Hone reads the tokenizer from it; found %s): pick a repository that has one, or a GGUF of the model", at, listOrNone(tokenizerFiles(info.Siblings)))
	}
	for _, n := range hfFiles {
		if s, ok := byName[n]; ok {
			p.files = append(p.files, s)
		}
	}
	if single {
		p.files = append(p.files, byName[hfSingle])
		return p, nil
	}
	// The index names the shards: read it from a cache, else fetch it first.
	idx := byName[hfIndex]
	b, err := c.readIndex(ctx, r, info.SHA, idx)
	if err != nil {
		return nil, err
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(b, &index); err != nil || len(index.WeightMap) == 0 {
		return nil, errorf(ErrNoWeights, "%s: %s is not a safetensors index (no weight_map)", at, hfIndex)
	}
	var shards []string
	for _, s := range index.WeightMap {
		if !slices.Contains(shards, s) {
			shards = append(shards, s)
		}
	}
	sort.Strings(shards)
	p.files = append(p.files, idx)
	for _, s := range shards {
		sib, ok := byName[s]
		if !ok || strings.Contains(s, "..") || strings.HasPrefix(s, "/") {
			return nil, errorf(ErrNoWeights, "%s: %s names the shard %s, which the repository does not have", at, hfIndex, s)
		}
		p.files = append(p.files, sib)
	}
	return p, nil
}

var (
	splitGGUF = regexp.MustCompile(`(?i)-\d{5}-of-\d{5}\.gguf$`)
	quantWord = regexp.MustCompile(`(?i)(?:^|[-._])((?:I?Q\d(?:_[A-Z0-9]+)*)|F16|BF16|F32)(?:[-._]|$)`)
)

// pickQuant finds the GGUF file of a quantization, as llama.cpp's -hf REPO:QUANT does: the
// file whose name has it as a word, case aside.
func pickQuant(at, quant string, ggufs []string) (string, error) {
	word := regexp.MustCompile(`(?i)(?:^|[-._])` + regexp.QuoteMeta(quant) + `(?:[-._]|$)`)
	var hits []string
	for _, g := range ggufs {
		if word.MatchString(path.Base(g)) {
			hits = append(hits, g)
		}
	}
	if len(hits) == 0 {
		if len(ggufs) == 0 {
			return "", errorf(ErrNotFound, "%s has no GGUF files, so no quantization %s: drop :%s to pull its safetensors model, if it has one", at, quant, quant)
		}
		return "", errorf(ErrNotFound, "%s has no GGUF file of quantization %s; it has %s", at, quant, quantList(ggufs))
	}
	if splitGGUF.MatchString(hits[0]) {
		return "", errorf(ErrNoWeights, "%s: quantization %s is split into %d files (%s); Hone loads one GGUF file: merge them with llama.cpp's llama-gguf-split --merge and serve the file, or pick a smaller quantization (%s)", at, quant, len(hits), hits[0], quantList(ggufs))
	}
	if len(hits) > 1 {
		return "", errorf(ErrNotFound, "%s has %d GGUF files of quantization %s (%s): name one with hf:REPO/FILE.gguf", at, len(hits), quant, strings.Join(hits, ", "))
	}
	return hits[0], nil
}

// defaultQuant picks the GGUF file of a repository when none is named: Q4_K_M when there is
// one (llama.cpp's default), else the first single file by name.
func defaultQuant(ggufs []string) string {
	for _, q := range []string{"Q4_K_M", "Q4_0", "Q8_0"} {
		if name, err := pickQuant("", q, ggufs); err == nil {
			return name
		}
	}
	for _, g := range ggufs {
		if !splitGGUF.MatchString(g) {
			return g
		}
	}
	return ggufs[0]
}

// quantList names each GGUF file's quantization, for messages.
func quantList(ggufs []string) string {
	var out []string
	for _, g := range ggufs {
		extra := ""
		if m := splitGGUF.FindString(g); m != "" {
			if !strings.HasPrefix(m, "-00001-") {
				continue
			}
			extra = ", split in " + strings.TrimLeft(m[len("-00001-of-"):len(m)-len(".gguf")], "0")
		}
		if m := quantWord.FindStringSubmatch(path.Base(g)); m != nil {
			out = append(out, strings.ToUpper(m[1])+" ("+g+extra+")")
		} else {
			out = append(out, g)
		}
	}
	return strings.Join(out, ", ")
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}

func tokenizerFiles(sibs []sibling) []string {
	var out []string
	for _, s := range sibs {
		if strings.Contains(strings.ToLower(path.Base(s.Name)), "tokenizer") || path.Base(s.Name) == "vocab.json" || path.Base(s.Name) == "merges.txt" {
			out = append(out, s.Name)
		}
	}
	return out
}

// noWeights says what a repository without loadable weights has instead.
func noWeights(at string, sibs []sibling) error {
	kinds := []struct {
		match func(string) bool
		what  string
	}{
		{func(n string) bool {
			return strings.HasSuffix(n, ".bin") || strings.HasSuffix(n, ".pt") || strings.HasSuffix(n, ".pth")
		}, "PyTorch pickles"},
		{func(n string) bool { return strings.HasSuffix(n, ".onnx") || strings.HasSuffix(n, ".onnx_data") }, "ONNX"},
		{func(n string) bool { return strings.HasSuffix(n, ".h5") }, "TensorFlow"},
		{func(n string) bool { return strings.HasSuffix(n, ".msgpack") }, "Flax"},
		{func(n string) bool { return strings.HasSuffix(n, ".mlmodel") || strings.Contains(n, ".mlpackage/") }, "Core ML"},
		{func(n string) bool { return path.Base(n) == "adapter_model.safetensors" }, "a LoRA adapter (not a whole model)"},
		{func(n string) bool {
			return strings.HasSuffix(n, ".safetensors") && path.Base(n) != "adapter_model.safetensors"
		}, "safetensors outside the model's layout"},
		{func(n string) bool { return strings.Contains(path.Base(n), "mmproj") }, "a vision projector"},
	}
	found := map[string][]string{}
	var order []string
	for _, s := range sibs {
		n := strings.ToLower(s.Name)
		for _, k := range kinds {
			if k.match(n) {
				if _, ok := found[k.what]; !ok {
					order = append(order, k.what)
				}
				found[k.what] = append(found[k.what], fmt.Sprintf("%s %s", s.Name, humanize.IBytes(uint64(s.size()))))
				break
			}
		}
	}
	var parts []string
	for _, k := range order {
		f := found[k]
		if len(f) > 4 {
			f = append(f[:4], fmt.Sprintf("%d more", len(found[k])-4))
		}
		parts = append(parts, k+": "+strings.Join(f, ", "))
	}
	had := "nothing that holds weights"
	if len(parts) > 0 {
		had = strings.Join(parts, "; ")
	} else if len(sibs) > 0 {
		var names []string
		for _, s := range sibs[:min(len(sibs), 8)] {
			names = append(names, s.Name)
		}
		had += " (" + strings.Join(names, ", ") + ")"
	}
	return errorf(ErrNoWeights, "%s has no weights Hone can load: it has %s. Hone loads a safetensors model (config.json, tokenizer.json, model.safetensors or its index and shards) or a GGUF file; look for the model's safetensors or GGUF repository (often named ...-GGUF)", at, had)
}

// fileMeta is what a HEAD of a resolve URL tells: the blob's id (ETag, or X-Linked-Etag for
// an LFS file: its SHA-256), its size, the commit, and where its bytes are.
type fileMeta struct {
	etag     string
	size     int64
	commit   string
	location string
}

func (c *Client) headHF(ctx context.Context, r Ref, commit, file string) (fileMeta, error) {
	u := c.resolveURL(r.Repo, commit, file)
	resp, err := c.request(ctx, "HEAD", u, http.Header{"Accept-Encoding": {"identity"}}, false)
	if err != nil {
		var se *statusError
		if errors.As(err, &se) {
			return fileMeta{}, c.explainHF(r, file)(se)
		}
		return fileMeta{}, err
	}
	resp.Body.Close()
	m := fileMeta{commit: resp.Header.Get("X-Repo-Commit"), location: resp.Request.URL.String()}
	m.etag = normalizeETag(resp.Header.Get("X-Linked-Etag"))
	if m.etag == "" {
		m.etag = normalizeETag(resp.Header.Get("ETag"))
	}
	size := resp.Header.Get("X-Linked-Size")
	if size == "" {
		size = resp.Header.Get("Content-Length")
	}
	m.size, _ = strconv.ParseInt(size, 10, 64)
	if loc := resp.Header.Get("Location"); loc != "" && resp.StatusCode >= 300 && resp.StatusCode < 400 {
		if l, err := resp.Request.URL.Parse(loc); err == nil {
			m.location = l.String()
		}
	}
	if m.etag == "" {
		return fileMeta{}, fmt.Errorf("%s: the hub's answer for %s has no ETag; is HF_ENDPOINT (%s) a Hugging Face Hub?", r, file, c.HFEndpoint)
	}
	return m, nil
}

func (c *Client) resolveURL(repo, rev, file string) string {
	parts := strings.Split(file, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return fmt.Sprintf("%s/%s/resolve/%s/%s", c.HFEndpoint, repo, url.PathEscape(rev), strings.Join(parts, "/"))
}

// normalizeETag drops the weak prefix and the quotes.
func normalizeETag(e string) string {
	e = strings.TrimPrefix(strings.TrimSpace(e), "W/")
	return strings.Trim(e, `"`)
}

// fetchHF downloads the plan's files that are not in the repository's blobs yet, a few
// at a time, and returns how many bytes it fetched.
func (c *Client) fetchHF(ctx context.Context, r Ref, commit string, p *hfPlan, repoDir string) (int64, error) {
	type job struct {
		spec blobSpec
		sib  sibling
	}
	var jobs []job
	for _, f := range p.files {
		meta, err := c.headHF(ctx, r, commit, f.Name)
		if err != nil {
			return 0, err
		}
		if meta.commit != "" && meta.commit != commit {
			return 0, fmt.Errorf("%s: the hub served %s from commit %s while the revision is at %s; pull again", r, f.Name, meta.commit, commit)
		}
		sum := digest{}
		switch {
		case len(meta.etag) == 64 && isHex(meta.etag):
			sum = digest{"sha256", meta.etag}
		case len(meta.etag) == 40 && isHex(meta.etag) && f.LFS == nil:
			sum = digest{"gitsha1", meta.etag}
		}
		if f.LFS != nil && f.LFS.SHA256 != "" {
			if sum.algo == "sha256" && sum.hex != f.LFS.SHA256 {
				return 0, fmt.Errorf("%s: %s: the hub lists the LFS oid %s but its resolve URL names %s; pull again", r, f.Name, f.LFS.SHA256, sum.hex)
			}
			sum = digest{"sha256", f.LFS.SHA256}
		}
		if sum.algo == "" {
			c.log().Warn("the hub publishes no hash for a file: it is not checked", "ref", r.String(), "file", f.Name, "etag", meta.etag)
		}
		if strings.ContainsAny(meta.etag, `/\`) || meta.etag == "." || meta.etag == ".." {
			return 0, fmt.Errorf("%s: %s: the hub's ETag %q cannot name a file", r, f.Name, meta.etag)
		}
		size := f.size()
		if meta.size > 0 && size > 0 && meta.size != size {
			return 0, fmt.Errorf("%s: %s: the hub lists %d bytes but its resolve URL says %d; pull again", r, f.Name, size, meta.size)
		}
		if size <= 0 {
			size = meta.size
		}
		if p.blob == nil {
			p.blob = map[string]string{}
		}
		p.blob[f.Name] = meta.etag
		dest := filepath.Join(repoDir, "blobs", meta.etag)
		if _, err := os.Stat(dest); err == nil {
			continue
		}
		jobs = append(jobs, job{spec: blobSpec{name: f.Name, url: c.resolveURL(r.Repo, commit, f.Name), located: meta.location,
			size: size, sum: sum, dest: dest, locate: "HEAD", explain: c.explainHF(r, f.Name)}, sib: f})
	}
	var total, resumed int64
	for _, j := range jobs {
		total += j.spec.size
		resumed += partialBytes(j.spec.dest, j.spec.size, j.spec.sum)
	}
	if err := c.checkSpace(repoDir, total-resumed); err != nil {
		return 0, err
	}
	c.Meter.plan(total, resumed)
	specs := make([]blobSpec, len(jobs))
	for i, j := range jobs {
		specs[i] = j.spec
	}
	if err := c.fetchAll(ctx, specs); err != nil {
		if final(err) {
			dropParts(specs) // the others' parts too, stopped by this error
		}
		return 0, err
	}
	return total - resumed, nil
}

func isHex(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// link points the snapshot's files at their blobs (relative symlinks, as huggingface_hub
// writes them), each made under a temporary name and renamed into place.
func (p *hfPlan) link(repoDir, commit string) error {
	snap := filepath.Join(repoDir, "snapshots", commit)
	for _, f := range p.files {
		etag := p.blob[f.Name]
		if etag == "" {
			return fmt.Errorf("%s was not fetched", f.Name)
		}
		dst := filepath.Join(snap, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		rel, err := filepath.Rel(filepath.Dir(dst), filepath.Join(repoDir, "blobs", etag))
		if err != nil {
			return err
		}
		if cur, err := os.Readlink(dst); err == nil && cur == rel {
			continue
		}
		tmp := dst + ".tmp-link"
		os.Remove(tmp)
		if err := os.Symlink(rel, tmp); err != nil {
			return err
		}
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
	}
	syncDir(snap)
	return nil
}

// readIndex reads a revision's safetensors index: from a snapshot of it in a cache, else
// fetched into Hone's cache first.
func (c *Client) readIndex(ctx context.Context, r Ref, commit string, idx sibling) ([]byte, error) {
	for _, root := range c.hfRoots() {
		if b, err := os.ReadFile(filepath.Join(root.dir, repoFolder(r.Repo), "snapshots", commit, hfIndex)); err == nil {
			return b, nil
		}
	}
	repoDir := filepath.Join(c.hfDir(), repoFolder(r.Repo))
	if err := c.markPull(repoDir, r); err != nil {
		return nil, err
	}
	p := &hfPlan{files: []sibling{idx}}
	if _, err := c.fetchHF(ctx, r, commit, p, repoDir); err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(repoDir, "blobs", p.blob[idx.Name]))
}

// writeRef records which commit a branch or tag revision was at (refs/REVISION), as
// huggingface_hub does; a commit revision needs none.
func (c *Client) writeRef(r Ref, commit string) error {
	if isCommit(r.Revision) {
		return nil
	}
	p := filepath.Join(c.hfDir(), repoFolder(r.Repo), "refs", filepath.FromSlash(r.Revision))
	if b, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(b)) == commit {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(commit), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// cacheRoot is a Hugging Face cache and whose it is.
type cacheRoot struct{ dir, name string }

func (c *Client) hfRoots() []cacheRoot {
	roots := []cacheRoot{{c.hfDir(), "hone"}}
	if c.HFCache != "" && filepath.Clean(c.HFCache) != filepath.Clean(c.hfDir()) {
		roots = append(roots, cacheRoot{c.HFCache, "huggingface_hub"})
	}
	return roots
}

// cachedHF finds r in a cache without asking the hub: the commit its revision was last at
// (refs/REVISION), or the revision itself when it is a commit, with the files r needs.
func (c *Client) cachedHF(r Ref) (Model, bool) {
	for _, root := range c.hfRoots() {
		repoDir := filepath.Join(root.dir, repoFolder(r.Repo))
		commit := r.Revision
		if !isCommit(commit) {
			b, err := os.ReadFile(filepath.Join(repoDir, "refs", filepath.FromSlash(r.Revision)))
			if err != nil {
				continue
			}
			commit = strings.TrimSpace(string(b))
		}
		snap := filepath.Join(repoDir, "snapshots", commit)
		if m, ok := snapshotModel(r, snap); ok {
			m.Revision, m.Cache, m.Origin = commit, root.name, c.repoURL(r)
			return m, true
		}
	}
	return Model{}, false
}

// snapshotModel reads a snapshot as r asks for it: its GGUF file, or a whole safetensors
// model (config, tokenizer, every shard of the index).
func snapshotModel(r Ref, snap string) (Model, bool) {
	if _, err := os.Stat(snap); err != nil {
		return Model{}, false
	}
	m := Model{Ref: r, Path: snap}
	var files []string
	switch {
	case r.File != "":
		files = []string{filepath.FromSlash(r.File)}
	case r.Quant != "":
		var ggufs []string
		_ = filepath.WalkDir(snap, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(strings.ToLower(p), ".gguf") {
				rel, _ := filepath.Rel(snap, p)
				ggufs = append(ggufs, filepath.ToSlash(rel))
			}
			return nil
		})
		sort.Strings(ggufs)
		name, err := pickQuant("", r.Quant, ggufs)
		if err != nil {
			return Model{}, false
		}
		files = []string{filepath.FromSlash(name)}
	default:
		files = []string{"config.json", "tokenizer.json"}
		if b, err := os.ReadFile(filepath.Join(snap, hfIndex)); err == nil {
			var index struct {
				WeightMap map[string]string `json:"weight_map"`
			}
			if json.Unmarshal(b, &index) != nil || len(index.WeightMap) == 0 {
				return Model{}, false
			}
			files = append(files, hfIndex)
			for _, s := range index.WeightMap {
				if !slices.Contains(files, s) {
					files = append(files, s)
				}
			}
		} else {
			files = append(files, hfSingle)
		}
		for _, n := range hfFiles {
			if fileExists(filepath.Join(snap, n)) && !slices.Contains(files, n) {
				files = append(files, n)
			}
		}
	}
	for _, f := range files {
		fi, err := os.Stat(filepath.Join(snap, f))
		if err != nil {
			return Model{}, false
		}
		m.Files++
		m.Bytes += fi.Size()
	}
	if r.File != "" || r.Quant != "" {
		m.Path = filepath.Join(snap, files[0])
	}
	return m, true
}

// short is a commit's first 12 characters.
func short(commit string) string { return commit[:min(len(commit), 12)] }

// rootCause is the innermost error, for short messages.
func rootCause(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}
