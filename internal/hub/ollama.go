package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/honeai/hone/internal/chattemplate"
	"github.com/honeai/hone/internal/gguf"
)

// An Ollama registry, as Ollama speaks to it (the Docker registry API v2):
//
//	GET {registry}/v2/{namespace}/{name}/manifests/{tag}    the manifest: a config and layers, each
//	                                                        {mediaType, digest sha256:HEX, size}
//	GET {registry}/v2/{namespace}/{name}/blobs/{digest}     a layer's bytes (a redirect to where they are)
//
// The layers Hone takes: application/vnd.ollama.image.model (the GGUF file), .template (a Go
// text/template chat template), .params (default options, JSON), .system (a default system
// prompt) and .license. The cache is Ollama's: blobs/sha256-HEX and
// manifests/{host}/{namespace}/{name}/{tag}; Hone adds gguf/{host}/{namespace}/{name}/{tag}.gguf,
// a link to the model layer under the name its loader reads.

const (
	mediaModel     = "application/vnd.ollama.image.model"
	mediaTemplate  = "application/vnd.ollama.image.template"
	mediaParams    = "application/vnd.ollama.image.params"
	mediaSystem    = "application/vnd.ollama.image.system"
	mediaLicense   = "application/vnd.ollama.image.license"
	mediaAdapter   = "application/vnd.ollama.image.adapter"
	mediaProjector = "application/vnd.ollama.image.projector"
	mediaMessages  = "application/vnd.ollama.image.messages"
	manifestAccept = "application/vnd.docker.distribution.manifest.v2+json"
)

type layer struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

type manifest struct {
	SchemaVersion int     `json:"schemaVersion"`
	MediaType     string  `json:"mediaType"`
	Config        layer   `json:"config"`
	Layers        []layer `json:"layers"`
}

var layerDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

func (m *manifest) layer(media string) *layer {
	for i := range m.Layers {
		if m.Layers[i].MediaType == media {
			return &m.Layers[i]
		}
	}
	return nil
}

func manifestPath(root string, r Ref) string {
	return filepath.Join(root, "manifests", r.Host, r.Namespace, r.Name, r.Tag)
}

// pullingPath is where a pull keeps the manifest it is downloading until it is done, so that
// an unfinished pull shows in the cache's list and can be removed.
func pullingPath(root string, r Ref) string {
	return filepath.Join(root, "pulling", r.Host, r.Namespace, r.Name, r.Tag)
}

func blobPath(root, dig string) string {
	return filepath.Join(root, "blobs", strings.Replace(dig, ":", "-", 1))
}

func (c *Client) ollamaRoots() []cacheRoot {
	roots := []cacheRoot{{c.ollamaDir(), "hone"}}
	if c.OllamaCache != "" && filepath.Clean(c.OllamaCache) != filepath.Clean(c.ollamaDir()) {
		roots = append(roots, cacheRoot{c.OllamaCache, "ollama"})
	}
	return roots
}

func (c *Client) registryBase(r Ref) string {
	if r.Host == DefaultHost {
		return c.OllamaRegistry
	}
	return "https://" + r.Host
}

func (c *Client) registryPage(r Ref) string {
	if r.Host == DefaultHost && r.Namespace == DefaultNamespace {
		return "https://ollama.com/library/" + r.Name + "/tags"
	}
	if r.Host == DefaultHost {
		return "https://ollama.com/" + r.Namespace + "/" + r.Name + "/tags"
	}
	return c.registryBase(r)
}

// pullOllama pulls an ollama: reference.
func (c *Client) pullOllama(ctx context.Context, r Ref) (_ Model, err error) {
	if c.Offline {
		if m, ok := c.cachedOllama(r); ok {
			return c.ollamaModel(r, m)
		}
		return Model{}, errorf(ErrOffline, "%s is not in the cache (%s, or Ollama's %s) and HONE_OFFLINE is set: unset it to download the model", r, c.ollamaDir(), c.OllamaCache)
	}
	mctx, cancel := context.WithTimeout(ctx, revisionTimeout)
	raw, man, err := c.manifest(mctx, r)
	cancel()
	if err != nil {
		if unreachable(err) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			if m, ok := c.cachedOllama(r); ok {
				m.notes = append(m.notes, fmt.Sprintf("%s could not be reached (%v): the cached copy is used", c.registryBase(r), rootCause(err)))
				return c.ollamaModel(r, m)
			}
			return Model{}, fmt.Errorf("cannot reach %s to pull %s: %w (check the network and proxy variables; HONE_OFFLINE=1 uses the cache only)", c.registryBase(r), r, rootCause(err))
		}
		return Model{}, err
	}
	want, notes, err := man.takes(r)
	if err != nil {
		return Model{}, err
	}
	sum := sha256.Sum256(raw)
	rev := "sha256:" + hex.EncodeToString(sum[:])
	// Already whole in a cache?
	for _, root := range c.ollamaRoots() {
		if allBlobs(root.dir, want) {
			if root.name == "hone" {
				if err := writeFileAtomic(manifestPath(root.dir, r), raw); err != nil {
					return Model{}, c.diskErr(err, root.dir, 0)
				}
			}
			m := ollamaCached{root: root, man: man, rev: rev, notes: notes}
			return c.ollamaModel(r, m)
		}
	}
	root := c.ollamaDir()
	var specs []blobSpec
	var total, resumed int64
	for _, l := range want {
		dest := blobPath(root, l.Digest)
		if fileExists(dest) {
			continue
		}
		hexSum := strings.TrimPrefix(l.Digest, "sha256:")
		b := blobSpec{name: shortMedia(l.MediaType), url: fmt.Sprintf("%s/v2/%s/%s/blobs/%s", c.registryBase(r), r.Namespace, r.Name, l.Digest),
			size: l.Size, sum: digest{"sha256", hexSum}, dest: dest, locate: "GET", explain: c.explainOllama(r)}
		specs = append(specs, b)
		total += l.Size
		resumed += partialBytes(dest, l.Size, b.sum)
	}
	pulling := pullingPath(root, r)
	defer func() {
		if err != nil && final(err) { // what this pull fetched and no manifest names
			os.Remove(pulling)
			removeEmptyDirs(filepath.Dir(pulling), filepath.Join(root, "pulling"))
			for _, b := range specs {
				if !c.ollamaReferenced(b.dest) {
					os.Remove(b.dest)
				}
			}
			dropParts(specs)
		}
	}()
	if err := c.checkSpace(root, total-resumed); err != nil {
		return Model{}, err
	}
	if err := writeFileAtomic(pulling, raw); err != nil {
		return Model{}, c.diskErr(err, root, 0)
	}
	c.Meter.plan(total, resumed)
	if err := c.fetchAll(ctx, specs); err != nil {
		return Model{}, err
	}
	if err := writeFileAtomic(manifestPath(root, r), raw); err != nil {
		return Model{}, c.diskErr(err, root, 0)
	}
	os.Remove(pulling)
	removeEmptyDirs(filepath.Dir(pulling), filepath.Join(root, "pulling"))
	m, err := c.ollamaModel(r, ollamaCached{root: cacheRoot{root, "hone"}, man: man, rev: rev, notes: notes})
	m.Downloaded = total - resumed
	return m, err
}

// takes checks a manifest and returns the layers to download and what is left out.
func (m *manifest) takes(r Ref) ([]layer, []string, error) {
	var notes []string
	var kinds []string
	for _, l := range m.Layers {
		kinds = append(kinds, l.MediaType)
	}
	if m.layer(mediaModel) == nil {
		return nil, nil, errorf(ErrNoWeights, "%s has no GGUF model layer (%s): its layers are %s", r, mediaModel, listOrNone(kinds))
	}
	if m.layer(mediaAdapter) != nil {
		return nil, nil, errorf(ErrNoWeights, "%s is a base model with a LoRA adapter layer, which Hone does not apply from a manifest: serve the base with its adapter trained in Hone, or pull a model without an adapter", r)
	}
	want := []layer{}
	if m.Config.Digest != "" {
		want = append(want, m.Config)
	}
	for _, l := range m.Layers {
		switch l.MediaType {
		case mediaModel, mediaTemplate, mediaParams, mediaSystem, mediaLicense:
			want = append(want, l)
		case mediaProjector:
			notes = append(notes, "its vision projector layer is not pulled: Hone serves text")
		case mediaMessages:
		default:
			notes = append(notes, "a layer Hone does not know is not pulled: "+l.MediaType)
		}
	}
	for _, l := range want {
		if !layerDigest.MatchString(l.Digest) || l.Size < 0 {
			return nil, nil, fmt.Errorf("%s: the manifest's layer %s has the digest %q, not sha256:HEX", r, l.MediaType, l.Digest)
		}
	}
	return want, notes, nil
}

func shortMedia(m string) string {
	if s, ok := strings.CutPrefix(m, "application/vnd.ollama.image."); ok {
		return s
	}
	return "config"
}

func allBlobs(root string, want []layer) bool {
	for _, l := range want {
		fi, err := os.Stat(blobPath(root, l.Digest))
		if err != nil || fi.Size() != l.Size {
			return false
		}
	}
	return true
}

// manifest fetches r's manifest.
func (c *Client) manifest(ctx context.Context, r Ref) ([]byte, *manifest, error) {
	u := fmt.Sprintf("%s/v2/%s/%s/manifests/%s", c.registryBase(r), r.Namespace, r.Name, r.Tag)
	h := http.Header{"Accept": {manifestAccept}}
	resp, err := c.request(ctx, "GET", u, h, true)
	var se *statusError
	if errors.As(err, &se) && se.code == http.StatusUnauthorized && se.authenticate != "" {
		if terr := c.registryLogin(ctx, se.authenticate, u); terr == nil {
			resp, err = c.request(ctx, "GET", u, h, true)
		}
	}
	if err != nil {
		if errors.As(err, &se) {
			return nil, nil, c.explainOllama(r)(se)
		}
		return nil, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return nil, nil, err
	}
	var m manifest
	if err := json.Unmarshal(raw, &m); err != nil || m.SchemaVersion != 2 {
		return nil, nil, fmt.Errorf("%s: the registry's manifest is not a schema 2 manifest (is %s an Ollama registry?)", r, c.registryBase(r))
	}
	return raw, &m, nil
}

// explainOllama turns the registry's error answer into what to do about it.
func (c *Client) explainOllama(r Ref) func(*statusError) error {
	return func(se *statusError) error {
		name := strings.TrimPrefix(r.String(), "ollama:")
		switch {
		case se.code == http.StatusNotFound && strings.Contains(strings.ToLower(se.message), "manifest unknown"):
			return errorf(ErrNotFound, "the registry %s has no %s (no tag %q of %s, or no such model): %s lists its tags, https://ollama.com/search the models", r.Host, name, r.Tag, r.Name, c.registryPage(r))
		case se.code == http.StatusNotFound:
			return errorf(ErrNotFound, "the registry %s has no model %s (%s): check the name (%s lists the models)", r.Host, name, se.message, "https://ollama.com/search")
		case se.code == http.StatusUnauthorized || se.code == http.StatusForbidden:
			return errorf(ErrAccess, "the registry %s refuses %s (%d%s): Hone pulls public models; a private one needs Ollama's own client (ollama pull %s), whose cache Hone then reads", r.Host, name, se.code, suffix(se.message), name)
		}
		return fmt.Errorf("%s: %w", r, se)
	}
}

// registryLogin answers a registry's Bearer challenge with an anonymous token, as the Docker
// registry protocol allows for public repositories.
func (c *Client) registryLogin(ctx context.Context, challenge, forURL string) error {
	scheme, params, _ := strings.Cut(challenge, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return fmt.Errorf("registry: authentication scheme %q", scheme)
	}
	kv := map[string]string{}
	for _, m := range regexp.MustCompile(`(\w+)="([^"]*)"`).FindAllStringSubmatch(params, -1) {
		kv[m[1]] = m[2]
	}
	realm, err := url.Parse(kv["realm"])
	if err != nil || realm.Scheme == "" {
		return fmt.Errorf("registry: no realm in %q", challenge)
	}
	q := realm.Query()
	for _, k := range []string{"service", "scope"} {
		if kv[k] != "" {
			q.Set(k, kv[k])
		}
	}
	realm.RawQuery = q.Encode()
	resp, err := c.request(ctx, "GET", realm.String(), nil, true)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var tok struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&tok); err != nil {
		return err
	}
	t := tok.Token
	if t == "" {
		t = tok.AccessToken
	}
	if t == "" {
		return errors.New("registry: no token")
	}
	c.regMu.Lock()
	if c.regTokens == nil {
		c.regTokens = map[string]string{}
	}
	c.regTokens[hostOf(forURL)] = t
	c.regMu.Unlock()
	return nil
}

// registryToken is the token a registry gave for url's host ("" none).
func (c *Client) registryToken(u string) string {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if len(c.regTokens) == 0 {
		return ""
	}
	return c.regTokens[hostOf(u)]
}

// ollamaCached is a manifest found whole in a cache.
type ollamaCached struct {
	root  cacheRoot
	man   *manifest
	rev   string
	notes []string
}

// cachedOllama finds r's manifest and its blobs in a cache.
func (c *Client) cachedOllama(r Ref) (ollamaCached, bool) {
	for _, root := range c.ollamaRoots() {
		raw, err := os.ReadFile(manifestPath(root.dir, r))
		if err != nil {
			continue
		}
		var m manifest
		if json.Unmarshal(raw, &m) != nil {
			continue
		}
		want, notes, err := m.takes(r)
		if err != nil || !allBlobs(root.dir, want) {
			continue
		}
		sum := sha256.Sum256(raw)
		return ollamaCached{root: root, man: &m, rev: "sha256:" + hex.EncodeToString(sum[:]), notes: notes}, true
	}
	return ollamaCached{}, false
}

// ollamaModel turns a cached manifest into what Hone loads: a .gguf link to the model layer
// in Hone's cache, and the chat template where the GGUF file has none (the manifest's
// template mapped to Hone's built-in one of its family).
func (c *Client) ollamaModel(r Ref, oc ollamaCached) (Model, error) {
	ml := oc.man.layer(mediaModel)
	blob := blobPath(oc.root.dir, ml.Digest)
	link := filepath.Join(c.ollamaDir(), "gguf", r.Host, r.Namespace, r.Name, r.Tag+".gguf")
	target := blob
	if oc.root.name == "hone" {
		target, _ = filepath.Rel(filepath.Dir(link), blob)
	} else if abs, err := filepath.Abs(blob); err == nil {
		target = abs
	}
	if cur, err := os.Readlink(link); err != nil || cur != target {
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			return Model{}, c.diskErr(err, c.ollamaDir(), 0)
		}
		tmp := link + ".tmp-link"
		os.Remove(tmp)
		if err := os.Symlink(target, tmp); err != nil {
			return Model{}, err
		}
		if err := os.Rename(tmp, link); err != nil {
			return Model{}, err
		}
	}
	m := Model{Ref: r, Path: link, Revision: oc.rev, Cache: oc.root.name, Notes: oc.notes,
		Origin: fmt.Sprintf("%s/v2/%s/%s/manifests/%s", c.registryBase(r), r.Namespace, r.Name, r.Tag)}
	for _, l := range append([]layer{oc.man.Config}, oc.man.Layers...) {
		if fi, err := os.Stat(blobPath(oc.root.dir, l.Digest)); err == nil && l.Digest != "" {
			m.Files++
			m.Bytes += fi.Size()
		}
	}
	f, err := gguf.Open(blob)
	if err != nil {
		return Model{}, fmt.Errorf("%s: its model layer is not a GGUF file Hone reads: %w", r, err)
	}
	hasTemplate := f.Metadata.Has("tokenizer.chat_template")
	f.Close()
	tl := oc.man.layer(mediaTemplate)
	if tl != nil && !hasTemplate {
		b, err := os.ReadFile(blobPath(oc.root.dir, tl.Digest))
		if err != nil {
			return Model{}, err
		}
		if fam := OllamaTemplateFamily(string(b)); fam != "" {
			m.ChatTemplate, _ = chattemplate.Builtin(fam)
			m.ChatTemplateFrom = fmt.Sprintf("%s's Ollama template, mapped to Hone's built-in %s", r, fam)
		} else {
			m.Notes = append(m.Notes, fmt.Sprintf("its Ollama template (%s) is of no family Hone knows, and its GGUF file has no chat template: Hone picks a built-in one from its vocabulary, or give one with --chat-template NAME=FILE", blobPath(oc.root.dir, tl.Digest)))
		}
	}
	if pl := oc.man.layer(mediaParams); pl != nil {
		if b, err := os.ReadFile(blobPath(oc.root.dir, pl.Digest)); err == nil && len(strings.TrimSpace(string(b))) > 2 {
			m.Notes = append(m.Notes, "Ollama's default options for it "+strings.Join(strings.Fields(string(b)), " ")+" are Ollama's: Hone's requests carry their own sampling fields, and it stops at the model's end-of-turn tokens")
		}
	}
	if oc.man.layer(mediaSystem) != nil {
		m.Notes = append(m.Notes, "its default system prompt (the manifest's system layer) is not added to requests: send it as a system message")
	}
	return m, nil
}

// OllamaTemplateFamily names Hone's built-in chat template of the family an Ollama
// template (Go text/template) writes, from the turn markers in it: llama3, qwen3 (ChatML
// with thinking), chatml, gemma, phi3, mistral; "" when it is none of them.
func OllamaTemplateFamily(tpl string) string {
	has := func(s ...string) bool {
		for _, x := range s {
			if !strings.Contains(tpl, x) {
				return false
			}
		}
		return true
	}
	switch {
	case has("<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"):
		return chattemplate.BuiltinLlama3
	case has("<|im_start|>", "<|im_end|>", "<think>"):
		return chattemplate.BuiltinQwen3
	case has("<|im_start|>", "<|im_end|>"):
		return chattemplate.BuiltinChatML
	case has("<start_of_turn>", "<end_of_turn>"):
		return chattemplate.BuiltinGemma
	case has("<|user|>", "<|assistant|>", "<|end|>"):
		return chattemplate.BuiltinPhi3
	case has("[INST]", "[/INST]"):
		return chattemplate.BuiltinMistral
	}
	return ""
}

// ollamaReferenced reports whether a manifest in Hone's cache names the blob.
func (c *Client) ollamaReferenced(blob string) bool {
	found := false
	_ = filepath.WalkDir(filepath.Join(c.ollamaDir(), "manifests"), func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || found {
			return nil
		}
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		var m manifest
		if json.Unmarshal(raw, &m) == nil {
			for _, l := range append([]layer{m.Config}, m.Layers...) {
				if l.Digest != "" && blobPath(c.ollamaDir(), l.Digest) == blob {
					found = true
				}
			}
		}
		return nil
	})
	return found
}

func listOllama(root cacheRoot) ([]Entry, error) {
	dir := filepath.Join(root.dir, "manifests")
	var out []Entry
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.IsDir() || strings.HasSuffix(p, ".tmp") {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		if len(parts) != 4 {
			return nil
		}
		r := Ref{Kind: Ollama, Host: parts[0], Namespace: parts[1], Name: parts[2], Tag: parts[3]}
		raw, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		var m manifest
		if json.Unmarshal(raw, &m) != nil {
			return nil
		}
		en := Entry{Ref: r.String(), Cache: root.name, Path: p}
		if ml := m.layer(mediaModel); ml != nil {
			en.Path = blobPath(root.dir, ml.Digest)
		}
		sum := sha256.Sum256(raw)
		en.Revision = "sha256:" + hex.EncodeToString(sum[:])
		for _, l := range append([]layer{m.Config}, m.Layers...) {
			if fi, err := os.Stat(blobPath(root.dir, l.Digest)); err == nil && l.Digest != "" {
				en.Files++
				en.Bytes += fi.Size()
				en.Modified = later(en.Modified, fi.ModTime())
			}
		}
		out = append(out, en)
		return nil
	})
	if root.name != "hone" {
		return out, err
	}
	// Unfinished pulls: what they have so far.
	pulling := filepath.Join(root.dir, "pulling")
	_ = filepath.WalkDir(pulling, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || strings.HasSuffix(p, ".tmp") {
			return nil
		}
		rel, _ := filepath.Rel(pulling, p)
		parts := strings.Split(filepath.ToSlash(rel), "/")
		raw, rerr := os.ReadFile(p)
		var m manifest
		if len(parts) != 4 || rerr != nil || json.Unmarshal(raw, &m) != nil {
			return nil
		}
		r := Ref{Kind: Ollama, Host: parts[0], Namespace: parts[1], Name: parts[2], Tag: parts[3]}
		en := Entry{Ref: r.String(), Cache: root.name, Path: filepath.Join(root.dir, "blobs"), Incomplete: true}
		for _, l := range append([]layer{m.Config}, m.Layers...) {
			for _, f := range []string{blobPath(root.dir, l.Digest), blobPath(root.dir, l.Digest) + partSuffix} {
				if fi, err := os.Stat(f); err == nil && l.Digest != "" {
					en.Bytes += fi.Size()
					en.Modified = later(en.Modified, fi.ModTime())
				}
			}
		}
		out = append(out, en)
		return nil
	})
	return out, err
}

func (c *Client) removeOllama(r Ref) (int64, error) {
	root := c.ollamaDir()
	p := manifestPath(root, r)
	raw, err := os.ReadFile(p)
	if err != nil {
		p = pullingPath(root, r) // an unfinished pull
		if raw, err = os.ReadFile(p); err != nil {
			return 0, errorf(ErrNotFound, "%s is not in Hone's cache (%s); hone models list shows what is", r, root)
		}
	}
	var m manifest
	_ = json.Unmarshal(raw, &m)
	if err := os.Remove(p); err != nil {
		return 0, err
	}
	removeEmptyDirs(filepath.Dir(p), filepath.Join(root, "manifests"))
	removeEmptyDirs(filepath.Dir(p), filepath.Join(root, "pulling"))
	link := filepath.Join(root, "gguf", r.Host, r.Namespace, r.Name, r.Tag+".gguf")
	os.Remove(link)
	removeEmptyDirs(filepath.Dir(link), filepath.Join(root, "gguf"))
	var freed int64
	seen := map[string]bool{}
	for _, l := range append([]layer{m.Config}, m.Layers...) {
		b := blobPath(root, l.Digest)
		if l.Digest == "" || seen[b] || c.ollamaReferenced(b) {
			continue
		}
		seen[b] = true
		for _, f := range []string{b, b + partSuffix, b + stateSuffix} {
			if fi, err := os.Stat(f); err == nil && os.Remove(f) == nil {
				freed += fi.Size()
			}
		}
	}
	return freed, nil
}
