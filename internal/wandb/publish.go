package wandb

import (
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/honeai/hone/internal/db"
)

// Hone makes some artifacts itself: a trained checkpoint is also a W&B "lora" artifact, as
// W&B Training keeps them, so that the wandb SDK and ART's client find, download and annotate
// it (Publish). Such a version is committed at once, with a manifest Hone writes as the SDK
// would (wandb-storage-policy-v1, MD5 digests) and the SDK's manifest digest, so that a
// client that logs the same files gets the same version back.

// PublishFile is one file of a version Hone publishes.
type PublishFile struct {
	Name string // its path in the artifact ('/'-separated)
	Path string // where it is on this node
}

// PublishInput is a version Hone publishes.
type PublishInput struct {
	Entity, Project, Type, Collection, RunName, Description string
	Metadata                                                map[string]any
	Files                                                   []PublishFile
	// Aliases are set on the version (moved from another version of the collection holding
	// them); "latest" too when Latest.
	Aliases []string
	Latest  bool
}

// Publish stores the files and commits them as the collection's next version (the version
// of the same files, when the collection has one: its aliases are set and it is answered).
func (s *Service) Publish(ctx context.Context, in PublishInput) (Artifact, error) {
	if in.Type == "" || in.Collection == "" || strings.ContainsAny(in.Collection, "/:") {
		return Artifact{}, fmt.Errorf("wandb: publish: bad type %q or collection %q", in.Type, in.Collection)
	}
	m := Manifest{Version: 1, StoragePolicy: "wandb-storage-policy-v1", StoragePolicyConfig: map[string]any{"storageLayout": "V2"},
		Contents: map[string]ManifestEntry{}}
	for _, f := range in.Files {
		md5hex, size, err := s.keepFile(ctx, in.Entity, f.Path)
		if err != nil {
			return Artifact{}, fmt.Errorf("wandb: publish %s: %w", f.Name, err)
		}
		raw, _ := hex.DecodeString(md5hex)
		m.Contents[f.Name] = ManifestEntry{Digest: base64.StdEncoding.EncodeToString(raw), Size: size}
	}
	mjs, err := json.Marshal(m)
	if err != nil {
		return Artifact{}, err
	}
	manifestMD5, err := s.keepBytes(ctx, in.Entity, mjs)
	if err != nil {
		return Artifact{}, fmt.Errorf("wandb: publish: manifest: %w", err)
	}
	digest := ManifestDigest(m)
	meta := "{}"
	if in.Metadata != nil {
		b, err := json.Marshal(in.Metadata)
		if err != nil {
			return Artifact{}, err
		}
		meta = string(b)
	}
	aliases := append([]string(nil), in.Aliases...)
	if in.Latest {
		aliases = append(aliases, "latest")
	}
	var id string
	err = s.db.WriteTx(ctx, func(tx *db.Tx) error {
		if err := lockCollection(ctx, tx, in.Entity, in.Project, in.Collection); err != nil {
			return err
		}
		var typ string
		err := tx.QueryRow(ctx, `SELECT type FROM wandb_artifacts WHERE entity = ? AND project = ? AND collection = ? LIMIT 1`, in.Entity, in.Project, in.Collection).Scan(&typ)
		if err == nil && typ != in.Type {
			return fmt.Errorf("wandb: publish: artifact %s is of type %s, not %s", in.Collection, typ, in.Type)
		}
		err = tx.QueryRow(ctx, `SELECT id FROM wandb_artifacts WHERE entity = ? AND project = ? AND collection = ? AND digest = ? AND state = 'COMMITTED'`,
			in.Entity, in.Project, in.Collection, digest).Scan(&id)
		if err == nil {
			return setAliases(ctx, tx, Artifact{ID: id, Entity: in.Entity, Project: in.Project, Collection: in.Collection}, aliases)
		}
		var next int
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version_index) + 1, 0) FROM wandb_artifacts WHERE entity = ? AND project = ? AND collection = ?`,
			in.Entity, in.Project, in.Collection).Scan(&next); err != nil {
			return err
		}
		id = GlobalID("Artifact", randomHex(12))
		now := s.nowString()
		if _, err := tx.Exec(ctx, `INSERT INTO wandb_artifacts (id, entity, project, type, collection, version_index, digest, state, description, metadata, pending_aliases, run_name, manifest_md5, size, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, 'COMMITTED', ?, ?, '[]', ?, ?, ?, ?, ?)`,
			id, in.Entity, in.Project, in.Type, in.Collection, next, digest, in.Description, meta, in.RunName, manifestMD5, m.Size(), now, now); err != nil {
			return err
		}
		return setAliases(ctx, tx, Artifact{ID: id, Entity: in.Entity, Project: in.Project, Collection: in.Collection}, aliases)
	})
	if err != nil {
		return Artifact{}, err
	}
	return s.ArtifactByID(ctx, in.Entity, id)
}

// DeleteVersion removes a committed version of a collection (its aliases with it); when it
// was the collection's "latest", the newest version left becomes it. Its files stay (other
// versions may hold them).
func (s *Service) DeleteVersion(ctx context.Context, entity, id string) error {
	return s.db.WriteTx(ctx, func(tx *db.Tx) error {
		var project, collection string
		err := tx.QueryRow(ctx, `SELECT project, collection FROM wandb_artifacts WHERE id = ? AND entity = ?`, id, entity).Scan(&project, &collection)
		if err != nil {
			return err
		}
		if err := lockCollection(ctx, tx, entity, project, collection); err != nil {
			return err
		}
		var latest int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM wandb_artifact_aliases WHERE artifact_id = ? AND alias = 'latest'`, id).Scan(&latest); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM wandb_artifact_aliases WHERE artifact_id = ?`, id); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM wandb_artifacts WHERE id = ?`, id); err != nil {
			return err
		}
		if latest == 0 {
			return nil
		}
		var newest string
		err = tx.QueryRow(ctx, `SELECT id FROM wandb_artifacts WHERE entity = ? AND project = ? AND collection = ? AND state = 'COMMITTED' ORDER BY version_index DESC LIMIT 1`,
			entity, project, collection).Scan(&newest)
		if err != nil {
			return nil // none left
		}
		return setAliases(ctx, tx, Artifact{ID: newest, Entity: entity, Project: project, Collection: collection}, []string{"latest"})
	})
}

// ManifestDigest is the wandb SDK's digest of a manifest (ArtifactManifestV1.digest with
// MD5): the MD5 of a header and a "path:digest" line per file, in path order.
func ManifestDigest(m Manifest) string {
	h := md5.New()
	io.WriteString(h, "wandb-artifact-manifest-v1\n")
	names := make([]string, 0, len(m.Contents))
	for n := range m.Contents {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(h, "%s:%s\n", n, m.Contents[n].Digest)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// lockCollection serialises the writers that number a collection's versions (PostgreSQL; a
// SQLite write transaction is already alone).
func lockCollection(ctx context.Context, tx *db.Tx, entity, project, collection string) error {
	if tx.Dialect() != db.Postgres {
		return nil
	}
	h := fnv.New64a()
	h.Write([]byte("hone-wandb-collection:" + entity + "/" + project + "/" + collection))
	_, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(?)", int64(h.Sum64()>>1))
	return err
}

// keepFile stores the file at path as entity's blob of its MD5 (unless it is there) and
// returns the MD5 (hex) and size.
func (s *Service) keepFile(ctx context.Context, entity, path string) (string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	sum := md5.New()
	n, err := io.Copy(sum, f)
	f.Close()
	if err != nil {
		return "", 0, err
	}
	md5hex := hex.EncodeToString(sum.Sum(nil))
	if _, err := s.BlobPath(entity, md5hex); err == nil {
		return md5hex, n, nil
	} else if !errors.Is(err, ErrNotFound) {
		return "", 0, err
	}
	if s.blobs != nil {
		return md5hex, n, s.putShared(ctx, entity, md5hex, path, func(*db.Tx, bool) error { return nil })
	}
	dir := filepath.Join(s.dir, entity, "wandb")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, err
	}
	tmp, err := os.CreateTemp(dir, ".publish-*")
	if err != nil {
		return "", 0, err
	}
	defer os.Remove(tmp.Name())
	src, err := os.Open(path)
	if err != nil {
		tmp.Close()
		return "", 0, err
	}
	_, err = io.Copy(tmp, src)
	src.Close()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, err
	}
	return md5hex, n, os.Rename(tmp.Name(), filepath.Join(dir, md5hex))
}

// keepBytes is keepFile for bytes in memory.
func (s *Service) keepBytes(ctx context.Context, entity string, b []byte) (string, error) {
	dir := filepath.Join(s.dir, entity, "wandb")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, ".publish-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp.Name())
	_, err = tmp.Write(b)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	md5hex, _, err := s.keepFile(ctx, entity, tmp.Name())
	return md5hex, err
}

// LocalFiles returns where each file of a committed version is on this node (its blob), by
// its path in the artifact; reference entries are left out.
func (s *Service) LocalFiles(ctx context.Context, a Artifact) (map[string]string, error) {
	m, err := s.Manifest(ctx, a)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for name, e := range m.Contents {
		if e.Ref != "" {
			continue
		}
		p, err := s.BlobPath(a.Entity, MD5Hex(e.Digest))
		if err != nil {
			return nil, fmt.Errorf("artifact %s file %s: %w", a.Collection, name, err)
		}
		out[name] = p
	}
	return out, nil
}
