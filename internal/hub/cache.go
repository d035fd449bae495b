package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// Pull makes r's model whole in a cache and says where it is: what is already cached is
// used as it is (a branch is asked for its current commit first, unless offline), what is
// missing is downloaded.
func (c *Client) Pull(ctx context.Context, r Ref) (Model, error) {
	switch r.Kind {
	case HF:
		return c.pullHF(ctx, r)
	case Ollama:
		return c.pullOllama(ctx, r)
	}
	return Model{}, fmt.Errorf("hub: a reference of unknown kind %q", r.Kind)
}

// pullMarker is the file a pull leaves in a repository's cache folder until it is done, so
// that `hone models list` shows an unfinished pull and what goes on with it.
const pullMarker = ".hone-pull"

func (c *Client) markPull(repoDir string, r Ref) error {
	if err := os.MkdirAll(filepath.Join(repoDir, "blobs"), 0o755); err != nil {
		return c.diskErr(err, repoDir, 0)
	}
	p := filepath.Join(repoDir, pullMarker)
	if b, err := os.ReadFile(p); err == nil && string(b) == r.String() {
		return nil
	}
	return c.diskErr(os.WriteFile(p, []byte(r.String()), 0o644), repoDir, 0)
}

// final reports whether a pull's error is one that pulling again does not fix by itself (so
// what the pull wrote is removed), rather than an interruption that a new pull goes on from.
func final(err error) bool {
	for _, k := range []error{ErrNotFound, ErrNoWeights, ErrAccess, ErrDiskFull, ErrChecksum} {
		if errors.Is(err, k) {
			return true
		}
	}
	return false
}

// dropFailed removes dir when the pull that is about to write it fails for good and dir
// did not exist before it (call it first; run what it returns when the pull returns).
func (c *Client) dropFailed(dir string, err *error) func() {
	fresh := !fileExists(dir)
	return func() {
		if *err != nil && fresh && final(*err) {
			os.RemoveAll(dir)
		}
	}
}

// lock waits for the lock of one blob of the cache.
func (c *Client) lock(ctx context.Context, dest, name string) (func(), error) {
	dir := filepath.Join(c.Dir, ".locks")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, c.diskErr(err, dir, 0)
	}
	sum := sha256.Sum256([]byte(dest))
	f, err := os.OpenFile(filepath.Join(dir, hex.EncodeToString(sum[:12])+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, c.diskErr(err, dir, 0)
	}
	for waited := false; ; {
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return nil, err
		}
		if ok {
			return func() { f.Close() }, nil
		}
		if !waited {
			c.log().Info("another pull is downloading this file; waiting for it", "file", name)
			waited = true
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			f.Close()
			return nil, err
		}
	}
}

// Entry is a model in a cache, as `hone models list` shows it.
type Entry struct {
	// Ref is the reference that pulls it again (its revision or tag included).
	Ref string
	// Cache is whose cache it is in: "hone", "huggingface_hub" or "ollama".
	Cache string
	// Path is what model.Load reads (a directory or a .gguf file); Dir the folder to look in.
	Path     string
	Revision string
	Files    int
	Bytes    int64
	Modified time.Time
	// Incomplete is a pull that did not finish: Bytes is what it has so far; pulling Ref again
	// goes on from there, removing it drops it.
	Incomplete bool
}

// List returns the models in Hone's cache and in huggingface_hub's and Ollama's.
func (c *Client) List() ([]Entry, error) {
	var out []Entry
	for _, root := range c.hfRoots() {
		es, err := listHF(root)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	for _, root := range c.ollamaRoots() {
		es, err := listOllama(root)
		if err != nil {
			return nil, err
		}
		out = append(out, es...)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Cache != out[j].Cache {
			return out[i].Cache == "hone"
		}
		return out[i].Ref < out[j].Ref
	})
	return out, nil
}

func listHF(root cacheRoot) ([]Entry, error) {
	repos, err := os.ReadDir(root.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, d := range repos {
		name, ok := strings.CutPrefix(d.Name(), "models--")
		if !ok || !d.IsDir() {
			continue
		}
		repo := strings.Replace(name, "--", "/", 1)
		repoDir := filepath.Join(root.dir, d.Name())
		refs := map[string][]string{} // commit → revisions
		refsDir := filepath.Join(repoDir, "refs")
		_ = filepath.WalkDir(refsDir, func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() && !strings.HasSuffix(p, ".tmp") {
				if b, err := os.ReadFile(p); err == nil {
					rel, _ := filepath.Rel(refsDir, p)
					refs[strings.TrimSpace(string(b))] = append(refs[strings.TrimSpace(string(b))], filepath.ToSlash(rel))
				}
			}
			return nil
		})
		linked := map[string]bool{}
		snaps, _ := os.ReadDir(filepath.Join(repoDir, "snapshots"))
		for _, s := range snaps {
			commit := s.Name()
			snap := filepath.Join(repoDir, "snapshots", commit)
			rev := commit
			if revs := refs[commit]; len(revs) > 0 {
				sort.Strings(revs)
				rev = revs[0]
			}
			dir := Entry{Cache: root.name, Path: snap, Revision: commit}
			var ggufs []Entry
			_ = filepath.WalkDir(snap, func(p string, e fs.DirEntry, err error) error {
				if err != nil || e.IsDir() {
					return nil
				}
				fi, err := os.Stat(p)
				if err != nil {
					return nil
				}
				if t, err := os.Readlink(p); err == nil {
					linked[filepath.Base(t)] = true
				}
				rel, _ := filepath.Rel(snap, p)
				rel = filepath.ToSlash(rel)
				if strings.HasSuffix(strings.ToLower(rel), ".gguf") {
					ref := Ref{Kind: HF, Repo: repo, File: rel, Revision: rev}
					ggufs = append(ggufs, Entry{Ref: ref.String(), Cache: root.name, Path: p, Revision: commit, Files: 1, Bytes: fi.Size(), Modified: fi.ModTime()})
					return nil
				}
				dir.Files++
				dir.Bytes += fi.Size()
				dir.Modified = later(dir.Modified, fi.ModTime())
				return nil
			})
			if fileExists(filepath.Join(snap, "config.json")) {
				dir.Ref = Ref{Kind: HF, Repo: repo, Revision: rev}.String()
				out = append(out, dir)
			}
			out = append(out, ggufs...)
		}
		// What an unfinished pull left: its marker, blobs no snapshot links, parts.
		marker, _ := os.ReadFile(filepath.Join(repoDir, pullMarker))
		var left int64
		var when time.Time
		blobs, _ := os.ReadDir(filepath.Join(repoDir, "blobs"))
		for _, b := range blobs {
			n := b.Name()
			if linked[n] || strings.HasSuffix(n, stateSuffix) {
				continue
			}
			if fi, err := b.Info(); err == nil {
				left += fi.Size()
				when = later(when, fi.ModTime())
			}
		}
		if root.name == "hone" && (len(marker) > 0 || left > 0) { // another tool's unfinished downloads are its own
			ref := string(marker)
			if ref == "" {
				ref = Ref{Kind: HF, Repo: repo, Revision: DefaultRevision}.String()
			}
			out = append(out, Entry{Ref: ref, Cache: root.name, Path: repoDir, Bytes: left, Modified: when, Incomplete: true})
		}
	}
	return out, nil
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Remove deletes r's model from Hone's cache and returns the bytes freed. A model that only
// huggingface_hub's or Ollama's cache holds is theirs to remove (the error says how).
func (c *Client) Remove(r Ref) (int64, error) {
	var (
		n   int64
		err error
	)
	switch r.Kind {
	case HF:
		n, err = c.removeHF(r)
	case Ollama:
		n, err = c.removeOllama(r)
	default:
		return 0, fmt.Errorf("hub: a reference of unknown kind %q", r.Kind)
	}
	if err == nil || !errors.Is(err, ErrNotFound) {
		return n, err
	}
	for _, e := range c.foreign(r) {
		return 0, e
	}
	return 0, err
}

// foreign says where else r is, when it is in another tool's cache.
func (c *Client) foreign(r Ref) []error {
	switch r.Kind {
	case HF:
		if c.HFCache != "" && fileExists(filepath.Join(c.HFCache, repoFolder(r.Repo))) {
			return []error{fmt.Errorf("%s is in huggingface_hub's cache (%s), which Hone reads but does not change: remove it with huggingface_hub's tools (hf cache delete)", r, filepath.Join(c.HFCache, repoFolder(r.Repo)))}
		}
	case Ollama:
		if c.OllamaCache != "" && fileExists(manifestPath(c.OllamaCache, r)) {
			return []error{fmt.Errorf("%s is in Ollama's cache (%s), which Hone reads but does not change: remove it with ollama rm %s", r, c.OllamaCache, strings.TrimPrefix(r.String(), "ollama:"))}
		}
	}
	return nil
}

func (c *Client) removeHF(r Ref) (int64, error) {
	repoDir := filepath.Join(c.hfDir(), repoFolder(r.Repo))
	if !fileExists(repoDir) {
		return 0, errorf(ErrNotFound, "%s is not in Hone's cache (%s); hone models list shows what is", r, c.hfDir())
	}
	before := dirSize(repoDir)
	if r.File == "" && r.Quant == "" && r.Revision == DefaultRevision {
		// The repository: every revision, every file, any unfinished pull.
		if err := os.RemoveAll(repoDir); err != nil {
			return 0, err
		}
		return before, nil
	}
	commits, err := c.snapshotsOf(repoDir, r.Revision)
	if err != nil {
		return 0, err
	}
	removed := false
	for _, commit := range commits {
		snap := filepath.Join(repoDir, "snapshots", commit)
		switch {
		case r.File == "" && r.Quant == "":
			if err := os.RemoveAll(snap); err != nil {
				return 0, err
			}
			removed = true
		default:
			m, ok := snapshotModel(r, snap)
			if !ok {
				continue
			}
			if err := os.Remove(m.Path); err != nil {
				return 0, err
			}
			removed = true
			removeEmptyDirs(filepath.Dir(m.Path), snap)
			if entries, _ := os.ReadDir(snap); len(entries) == 0 {
				os.Remove(snap)
			}
		}
	}
	if !removed {
		return 0, errorf(ErrNotFound, "%s is not in Hone's cache (%s); hone models list shows what is", r, c.hfDir())
	}
	gcHF(repoDir)
	if !fileExists(repoDir) {
		return before, nil
	}
	return before - dirSize(repoDir), nil
}

// snapshotsOf is the commits a revision names in a repository's cache: the commit itself,
// the one refs/REVISION names, or with the default revision every snapshot.
func (c *Client) snapshotsOf(repoDir, rev string) ([]string, error) {
	if isCommit(rev) {
		return []string{rev}, nil
	}
	if rev != DefaultRevision {
		b, err := os.ReadFile(filepath.Join(repoDir, "refs", filepath.FromSlash(rev)))
		if err != nil {
			return nil, nil
		}
		return []string{strings.TrimSpace(string(b))}, nil
	}
	snaps, _ := os.ReadDir(filepath.Join(repoDir, "snapshots"))
	var out []string
	for _, s := range snaps {
		out = append(out, s.Name())
	}
	return out, nil
}

// gcHF removes the blobs no snapshot links, refs to snapshots that are gone, and the whole
// repository folder once nothing is left in it.
func gcHF(repoDir string) {
	linked := map[string]bool{}
	snaps, _ := os.ReadDir(filepath.Join(repoDir, "snapshots"))
	commits := map[string]bool{}
	for _, s := range snaps {
		commits[s.Name()] = true
		_ = filepath.WalkDir(filepath.Join(repoDir, "snapshots", s.Name()), func(p string, e fs.DirEntry, err error) error {
			if err == nil && !e.IsDir() {
				if t, err := os.Readlink(p); err == nil {
					linked[filepath.Base(t)] = true
				}
			}
			return nil
		})
	}
	blobs, _ := os.ReadDir(filepath.Join(repoDir, "blobs"))
	for _, b := range blobs {
		n := strings.TrimSuffix(strings.TrimSuffix(b.Name(), stateSuffix), partSuffix)
		if !linked[n] {
			os.Remove(filepath.Join(repoDir, "blobs", b.Name()))
		}
	}
	refsDir := filepath.Join(repoDir, "refs")
	_ = filepath.WalkDir(refsDir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && !e.IsDir() {
			if b, err := os.ReadFile(p); err == nil && !commits[strings.TrimSpace(string(b))] {
				os.Remove(p)
			}
		}
		return nil
	})
	if len(commits) == 0 {
		os.RemoveAll(repoDir)
	}
}

func removeEmptyDirs(dir, stop string) {
	for dir != stop && strings.HasPrefix(dir, stop) {
		if os.Remove(dir) != nil {
			return
		}
		dir = filepath.Dir(dir)
	}
}

func dirSize(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// writeFileAtomic writes b to p through a temporary file renamed into place.
func writeFileAtomic(p string, b []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		return err
	}
	syncDir(filepath.Dir(p))
	return nil
}
