// Package wandb keeps the part of Weights & Biases' data that its SDK writes when it starts a
// run and logs an artifact: runs (config, summary, history lines from the file stream, the
// files the run uploads), artifacts (versions, aliases, manifests) and their files in a blob
// store on disk (content-addressed by MD5, as W&B names them, one folder per entity). The HTTP
// side (GraphQL answerer, upload and download routes, file stream) is internal/wandbapi;
// training reads an artifact's files through Service.ResolveFile and publishes its
// checkpoints as "lora" artifacts through Service.Publish (publish.go). No HTTP here.
package wandb

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/quota"
)

// ErrNotFound is returned for a run, artifact, upload or blob that does not exist (or belongs to
// another entity: the two are not told apart).
var ErrNotFound = errors.New("not found")

var migrations = []db.Migration{{Version: 1, SQLite: `
CREATE TABLE wandb_runs (
	entity TEXT NOT NULL, project TEXT NOT NULL, name TEXT NOT NULL,
	id TEXT NOT NULL, display_name TEXT NOT NULL, job_type TEXT NOT NULL,
	config TEXT NOT NULL, summary TEXT NOT NULL, state TEXT NOT NULL,
	history_lines INTEGER NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
	PRIMARY KEY (entity, project, name));
CREATE TABLE wandb_run_history (
	entity TEXT NOT NULL, project TEXT NOT NULL, run TEXT NOT NULL, line INTEGER NOT NULL, data TEXT NOT NULL,
	PRIMARY KEY (entity, project, run, line));
CREATE TABLE wandb_run_files (
	entity TEXT NOT NULL, project TEXT NOT NULL, run TEXT NOT NULL, name TEXT NOT NULL,
	md5 TEXT NOT NULL, size INTEGER NOT NULL, updated_at TEXT NOT NULL,
	PRIMARY KEY (entity, project, run, name));
CREATE TABLE wandb_artifacts (
	id TEXT PRIMARY KEY, entity TEXT NOT NULL, project TEXT NOT NULL, type TEXT NOT NULL,
	collection TEXT NOT NULL, version_index INTEGER, digest TEXT NOT NULL, state TEXT NOT NULL,
	description TEXT NOT NULL, metadata TEXT NOT NULL, pending_aliases TEXT NOT NULL,
	run_name TEXT NOT NULL, manifest_md5 TEXT NOT NULL, size INTEGER NOT NULL,
	created_at TEXT NOT NULL, updated_at TEXT NOT NULL);
CREATE INDEX wandb_artifacts_collection ON wandb_artifacts (entity, project, collection, version_index);
CREATE TABLE wandb_artifact_aliases (
	entity TEXT NOT NULL, project TEXT NOT NULL, collection TEXT NOT NULL, alias TEXT NOT NULL,
	artifact_id TEXT NOT NULL, PRIMARY KEY (entity, project, collection, alias));
CREATE TABLE wandb_secrets (name TEXT PRIMARY KEY, secret TEXT NOT NULL);
CREATE TABLE wandb_uploads (
	token_hash TEXT PRIMARY KEY, entity TEXT NOT NULL, kind TEXT NOT NULL, artifact_id TEXT NOT NULL,
	md5 TEXT NOT NULL, project TEXT NOT NULL, run TEXT NOT NULL, name TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE INDEX wandb_uploads_created ON wandb_uploads (created_at)
`}, {Version: 2,
	// Sizes are 64-bit: PostgreSQL's INTEGER is 32 (a run file of 2 GiB failed to be
	// recorded); SQLite's INTEGER is 64 already.
	SQLite: `SELECT 1`, Postgres: `
ALTER TABLE wandb_run_files ALTER COLUMN size TYPE BIGINT;
ALTER TABLE wandb_artifacts ALTER COLUMN size TYPE BIGINT`}}

// Service is the W&B run and artifact store.
type Service struct {
	db     *db.DB
	secret []byte // signs download URLs; kept in the store so that every server process agrees
	dir    string // blobs: dir/<entity>/wandb/<md5 hex>
	now    func() time.Time
	blobs  SharedBlobs // set by UseBlobs: files are shared blobs instead (shared.go)
	// localMu orders the uploads that put files in place in the files directory.
	localMu sync.Mutex
	// MaxUpload is the most bytes of one upload (0: no limit): --max-upload-size.
	MaxUpload int64
	// Quota, when set, counts and bounds the bytes each entity's uploads store.
	Quota *quota.Quota
}

// Open migrates the store and returns the service keeping blobs under filesDir.
func Open(ctx context.Context, d *db.DB, filesDir string) (*Service, error) {
	if err := d.Migrate(ctx, "wandb", migrations); err != nil {
		return nil, err
	}
	s := &Service{db: d, dir: filesDir, now: time.Now}
	if _, err := d.Exec(ctx, `INSERT INTO wandb_secrets (name, secret) VALUES ('download', ?) ON CONFLICT (name) DO NOTHING`, randomHex(32)); err != nil {
		return nil, err
	}
	var secret string
	if err := d.QueryRow(ctx, `SELECT secret FROM wandb_secrets WHERE name = 'download'`).Scan(&secret); err != nil {
		return nil, err
	}
	s.secret = []byte(secret)
	return s, nil
}

// DownloadTTL is how long a signed download URL works.
const DownloadTTL = time.Hour

// SignDownload returns the expiry (Unix seconds) and signature that let a download URL of
// entity's blob work without credentials (as W&B's direct URLs do) until then.
func (s *Service) SignDownload(entity, md5hex string) (exp int64, sig string) {
	exp = s.now().Add(DownloadTTL).Unix()
	return exp, s.sign(entity, md5hex, exp)
}

func (s *Service) sign(entity, md5hex string, exp int64) string {
	m := hmac.New(sha256.New, s.secret)
	fmt.Fprintf(m, "%s\x00%s\x00%d", entity, md5hex, exp)
	return hex.EncodeToString(m.Sum(nil))
}

// VerifyDownload checks a signed download URL's expiry and signature.
func (s *Service) VerifyDownload(entity, md5hex string, exp int64, sig string) bool {
	return s.now().Unix() <= exp && hmac.Equal([]byte(sig), []byte(s.sign(entity, md5hex, exp)))
}

func (s *Service) nowString() string { return db.FormatTime(s.now()) }

// FormatTime formats t as the W&B API answers a run's or an artifact's times: the store's
// fixed-width UTC layout (db.TimeLayout).
func FormatTime(t time.Time) string { return db.FormatTime(t) }

// GlobalID is W&B's form of a node id: base64 of "<Type>:<key>".
func GlobalID(typ, key string) string {
	return base64.StdEncoding.EncodeToString([]byte(typ + ":" + key))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ---- runs ----

// Run is a W&B run ("bucket" in the GraphQL API).
type Run struct {
	ID, Entity, Project, Name, DisplayName, JobType string
	Config, Summary                                 string // JSON objects
	State                                           string // running, finished, crashed
	HistoryLines                                    int
	CreatedAt                                       time.Time
}

// RunInput is what upsertBucket may set; empty fields keep their value.
type RunInput struct {
	DisplayName, JobType, Config, Summary, State string
}

// UpsertRun creates or updates a run; inserted says whether it is new.
func (s *Service) UpsertRun(ctx context.Context, entity, project, name string, in RunInput) (r Run, inserted bool, err error) {
	if project == "" {
		project = "uncategorized"
	}
	if name == "" {
		name = randomHex(4)
	}
	now := s.nowString()
	err = s.db.WriteTx(ctx, func(tx *db.Tx) error {
		old, err := scanRun(tx.QueryRow(ctx, `SELECT `+runCols+` FROM wandb_runs WHERE entity = ? AND project = ? AND name = ?`, entity, project, name))
		switch {
		case errors.Is(err, ErrNotFound):
			inserted = true
			old = Run{ID: GlobalID("Run", entity+"/"+project+"/"+name), Entity: entity, Project: project, Name: name,
				DisplayName: name, Config: "{}", Summary: "{}", State: "running"}
		case err != nil:
			return err
		}
		if in.DisplayName != "" {
			old.DisplayName = in.DisplayName
		}
		if in.JobType != "" {
			old.JobType = in.JobType
		}
		if in.Config != "" {
			old.Config = mergeConfig(old.Config, in.Config)
		}
		if in.Summary != "" {
			old.Summary = in.Summary
		}
		if in.State != "" {
			old.State = in.State
		}
		if inserted {
			_, err = tx.Exec(ctx, `INSERT INTO wandb_runs (entity, project, name, id, display_name, job_type, config, summary, state, history_lines, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 0, ?, ?)`, entity, project, name, old.ID, old.DisplayName, old.JobType, old.Config, old.Summary, old.State, now, now)
		} else {
			_, err = tx.Exec(ctx, `UPDATE wandb_runs SET display_name = ?, job_type = ?, config = ?, summary = ?, state = ?, updated_at = ?
				WHERE entity = ? AND project = ? AND name = ?`, old.DisplayName, old.JobType, old.Config, old.Summary, old.State, now, entity, project, name)
		}
		r = old
		return err
	})
	return r, inserted, err
}

// mergeConfig merges the keys of a run's config update into the stored config (W&B's
// upsertBucket replaces the keys it is sent).
func mergeConfig(old, upd string) string {
	var a, b map[string]json.RawMessage
	if json.Unmarshal([]byte(old), &a) != nil || a == nil {
		a = map[string]json.RawMessage{}
	}
	if json.Unmarshal([]byte(upd), &b) != nil {
		return old
	}
	for k, v := range b {
		a[k] = v
	}
	out, _ := json.Marshal(a)
	return string(out)
}

const runCols = `id, entity, project, name, display_name, job_type, config, summary, state, history_lines, created_at`

type scanner interface{ Scan(...any) error }

func scanRun(row scanner) (Run, error) {
	var r Run
	var created string
	if err := row.Scan(&r.ID, &r.Entity, &r.Project, &r.Name, &r.DisplayName, &r.JobType, &r.Config, &r.Summary, &r.State, &r.HistoryLines, &created); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return Run{}, ErrNotFound
		}
		return Run{}, err
	}
	r.CreatedAt, _ = db.ParseTime(created)
	return r, nil
}

// Run returns a run of entity.
func (s *Service) Run(ctx context.Context, entity, project, name string) (Run, error) {
	return scanRun(s.db.QueryRow(ctx, `SELECT `+runCols+` FROM wandb_runs WHERE entity = ? AND project = ? AND name = ?`, entity, project, name))
}

// History returns a run's history lines (JSON objects) in order.
func (s *Service) History(ctx context.Context, entity, project, run string) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT data FROM wandb_run_history WHERE entity = ? AND project = ? AND run = ? ORDER BY line`, entity, project, run)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// StreamChunk is one file's part of a file-stream request: lines starting at Offset.
type StreamChunk struct {
	Offset  int      `json:"offset"`
	Content []string `json:"content"`
}

// Stream applies a file-stream request to a run of entity (created when missing, as W&B does
// for a run that streams before its upsert lands): history lines are kept by line number (a
// resent line replaces itself), the summary's last line becomes the run's summary, and a
// complete request finishes the run (crashed for a non-zero exit code). Console output and
// system events are accepted and not kept.
func (s *Service) Stream(ctx context.Context, entity, project, run string, files map[string]StreamChunk, complete bool, exitCode int) error {
	if _, err := s.Run(ctx, entity, project, run); errors.Is(err, ErrNotFound) {
		if _, _, err := s.UpsertRun(ctx, entity, project, run, RunInput{}); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	for name, c := range files {
		if c.Offset < 0 {
			return fault.Invalid("files", "files.%s.offset: must not be negative", name)
		}
		if name == "wandb-history.jsonl" || name == "wandb-summary.json" {
			for i, line := range c.Content {
				if !json.Valid([]byte(line)) {
					return fault.Invalid("files", "files.%s.content[%d]: not JSON", name, i)
				}
			}
		}
	}
	return s.db.WriteTx(ctx, func(tx *db.Tx) error {
		if h, ok := files["wandb-history.jsonl"]; ok {
			for i, line := range h.Content {
				if _, err := tx.Exec(ctx, `DELETE FROM wandb_run_history WHERE entity = ? AND project = ? AND run = ? AND line = ?`, entity, project, run, h.Offset+i); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO wandb_run_history (entity, project, run, line, data) VALUES (?, ?, ?, ?, ?)`, entity, project, run, h.Offset+i, line); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(ctx, `UPDATE wandb_runs SET history_lines = (SELECT COUNT(*) FROM wandb_run_history WHERE entity = ? AND project = ? AND run = ?)
				WHERE entity = ? AND project = ? AND name = ?`, entity, project, run, entity, project, run); err != nil {
				return err
			}
		}
		if sm, ok := files["wandb-summary.json"]; ok && len(sm.Content) > 0 {
			if _, err := tx.Exec(ctx, `UPDATE wandb_runs SET summary = ? WHERE entity = ? AND project = ? AND name = ?`, sm.Content[len(sm.Content)-1], entity, project, run); err != nil {
				return err
			}
		}
		state := "running"
		if complete {
			state = "finished"
			if exitCode != 0 {
				state = "crashed"
			}
		}
		_, err := tx.Exec(ctx, `UPDATE wandb_runs SET state = ?, updated_at = ? WHERE entity = ? AND project = ? AND name = ?`, state, s.nowString(), entity, project, run)
		return err
	})
}

// ---- blobs and uploads ----

// BlobPath is where an entity's blob of the given MD5 (hex) lives; ErrNotFound if absent.
func (s *Service) BlobPath(entity, md5hex string) (string, error) {
	if len(md5hex) != 32 || strings.Trim(md5hex, "0123456789abcdef") != "" {
		return "", ErrNotFound
	}
	if s.blobs != nil {
		return s.sharedPath(entity, md5hex)
	}
	p := filepath.Join(s.dir, entity, "wandb", md5hex)
	if _, err := os.Stat(p); err != nil {
		return "", ErrNotFound
	}
	return p, nil
}

// MD5Hex turns W&B's base64 MD5 digest into hex ("" when it is not one).
func MD5Hex(b64 string) string {
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) != md5.Size {
		return ""
	}
	return hex.EncodeToString(b)
}

// Upload kinds.
const (
	UploadFile     = "file"     // an artifact file whose MD5 is known
	UploadManifest = "manifest" // an artifact's manifest
	UploadRunFile  = "run-file" // a file of a run (metadata, config, output)
)

// Upload describes what a PUT to an upload URL stores.
type Upload struct {
	Entity, Kind, ArtifactID, MD5 string // MD5: base64, for UploadFile
	Project, Run, Name            string // for UploadRunFile
}

// NewUpload records an upload and returns its secret token (only its hash is kept); expired
// uploads are forgotten on the way.
func (s *Service) NewUpload(ctx context.Context, u Upload) (string, error) {
	if _, err := s.db.Exec(ctx, `DELETE FROM wandb_uploads WHERE created_at < ?`, db.FormatTime(s.now().Add(-uploadTTL))); err != nil {
		return "", err
	}
	token := randomHex(24)
	h := sha256.Sum256([]byte(token))
	_, err := s.db.Exec(ctx, `INSERT INTO wandb_uploads (token_hash, entity, kind, artifact_id, md5, project, run, name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		hex.EncodeToString(h[:]), u.Entity, u.Kind, u.ArtifactID, u.MD5, u.Project, u.Run, u.Name, s.nowString())
	return token, err
}

// NewUploads is NewUpload for many uploads at once (createRunFiles of a run's files): one
// transaction, one statement per batch of uploadBatch rows, the tokens in the order of us.
func (s *Service) NewUploads(ctx context.Context, us []Upload) ([]string, error) {
	tokens := make([]string, len(us))
	err := s.db.WriteTx(ctx, func(tx *db.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM wandb_uploads WHERE created_at < ?`, db.FormatTime(s.now().Add(-uploadTTL))); err != nil {
			return err
		}
		now := s.nowString()
		for start := 0; start < len(us); start += uploadBatch {
			batch := us[start:min(start+uploadBatch, len(us))]
			q := strings.Builder{}
			q.WriteString(`INSERT INTO wandb_uploads (token_hash, entity, kind, artifact_id, md5, project, run, name, created_at) VALUES `)
			args := make([]any, 0, 9*len(batch))
			for i, u := range batch {
				token := randomHex(24)
				tokens[start+i] = token
				h := sha256.Sum256([]byte(token))
				if i > 0 {
					q.WriteString(", ")
				}
				q.WriteString("(?, ?, ?, ?, ?, ?, ?, ?, ?)")
				args = append(args, hex.EncodeToString(h[:]), u.Entity, u.Kind, u.ArtifactID, u.MD5, u.Project, u.Run, u.Name, now)
			}
			if _, err := tx.Exec(ctx, q.String(), args...); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tokens, nil
}

// uploadBatch is how many uploads one statement of NewUploads inserts (9 parameters each,
// under SQLite's and PostgreSQL's limits on a statement's parameters).
const uploadBatch = 1000

// uploadTTL bounds how long an upload URL works.
const uploadTTL = 24 * time.Hour

// PutUpload stores the body sent to an upload URL, streaming it to a temporary file (whatever
// its size) while its MD5 is computed; a file whose MD5 differs from the one announced (or
// from Content-MD5, when sent) is refused and nothing is kept.
func (s *Service) PutUpload(ctx context.Context, token string, body io.Reader, contentMD5 string) error {
	return s.PutUploadSized(ctx, token, body, contentMD5, -1)
}

// PutUploadSized is PutUpload of a body of length bytes as announced (Content-Length; -1:
// unknown, chunked). An upload past MaxUpload is refused (a too-large fault naming
// --max-upload-size), and one that would take its entity past its quota (Quota: a forbidden
// fault naming --entity-quota), both before any byte is written when the length is announced,
// and as soon as the body passes the limit otherwise; nothing of a refused upload is kept.
func (s *Service) PutUploadSized(ctx context.Context, token string, body io.Reader, contentMD5 string, length int64) error {
	h := sha256.Sum256([]byte(token))
	var u Upload
	var created string
	err := s.db.QueryRow(ctx, `SELECT entity, kind, artifact_id, md5, project, run, name, created_at FROM wandb_uploads WHERE token_hash = ?`, hex.EncodeToString(h[:])).
		Scan(&u.Entity, &u.Kind, &u.ArtifactID, &u.MD5, &u.Project, &u.Run, &u.Name, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return fault.NotFound("token", "this upload URL is not known (or has expired)")
	} else if err != nil {
		return err
	}
	if t, err := db.ParseTime(created); err == nil && s.now().Sub(t) > uploadTTL {
		return fault.NotFound("token", "this upload URL has expired")
	}
	if s.MaxUpload > 0 && length > s.MaxUpload {
		return tooLarge(length, s.MaxUpload)
	}
	used, left, err := s.Quota.Room(ctx, u.Entity)
	if err != nil {
		return err
	}
	if left >= 0 && length > left {
		return s.Quota.Exceeded(u.Entity, used, length, "body")
	}
	dir := filepath.Join(s.dir, u.Entity, "wandb")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".upload-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	sum := md5.New()
	in := &uploadBody{r: body, max: s.MaxUpload, left: left}
	n, err := io.Copy(io.MultiWriter(tmp, sum), in)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	switch {
	case errors.Is(in.err, errTooLarge):
		return tooLarge(in.n, s.MaxUpload)
	case errors.Is(in.err, errOverQuota):
		return s.Quota.Exceeded(u.Entity, used, in.n, "body")
	case in.err != nil: // the client's body failed, not the disk
		return fault.Invalid("body", "the upload ended after %d bytes, before its end: %v", in.n, in.err)
	}
	if err != nil {
		return err
	}
	got := base64.StdEncoding.EncodeToString(sum.Sum(nil))
	if u.Kind == UploadFile && u.MD5 != "" && got != u.MD5 {
		return fault.Invalid("body", "the file's MD5 is %s, not %s as announced", got, u.MD5)
	}
	if contentMD5 != "" && contentMD5 != got {
		return fault.Invalid("Content-MD5", "the body's MD5 is %s, not the Content-MD5 %s", got, contentMD5)
	}
	md5hex := hex.EncodeToString(sum.Sum(nil))
	// A file new to the entity is charged to its quota in the transaction that records it.
	record := func(tx *db.Tx, created bool) error {
		if created {
			if err := s.Quota.ChargeTx(ctx, tx, u.Entity, n, "body"); err != nil {
				return err
			}
		}
		return s.recordUpload(ctx, tx, u, md5hex, n)
	}
	if s.blobs != nil {
		return s.putShared(ctx, u.Entity, md5hex, tmp.Name(), record)
	}
	return s.putLocal(ctx, tmp.Name(), filepath.Join(dir, md5hex), record)
}

// uploadBody reads an upload's body, counting it, stopping it past max bytes (errTooLarge)
// or left bytes (errOverQuota; -1: no quota), and keeping its error apart from the disk's.
type uploadBody struct {
	r         io.Reader
	max, left int64
	n         int64
	err       error
}

var (
	errTooLarge  = errors.New("the upload is larger than the server's limit")
	errOverQuota = errors.New("the upload passes its entity's quota")
)

func (b *uploadBody) Read(p []byte) (int, error) {
	k, err := b.r.Read(p)
	b.n += int64(k)
	switch {
	case b.max > 0 && b.n > b.max:
		err = errTooLarge
	case b.left >= 0 && b.n > b.left:
		err = errOverQuota
	}
	if err != nil && !errors.Is(err, io.EOF) {
		b.err = err
	}
	return k, err
}

// tooLarge is the fault of an upload of n bytes (or more) past the limit of max.
func tooLarge(n, max int64) error {
	return fault.TooLarge("body", "the upload of %s or more is larger than the server's limit of %s per upload (--max-upload-size)",
		humanize.IBytes(uint64(n)), humanize.IBytes(uint64(max)))
}

// putLocal moves an uploaded file (written and checked at tmp) to dst, its place in the
// files directory, and writes its rows with record: both or, whatever fails, neither (a file
// it put in place is removed again; one that was there already, another upload's, stays).
func (s *Service) putLocal(ctx context.Context, tmp, dst string, record func(tx *db.Tx, created bool) error) error {
	s.localMu.Lock() // no other upload sees dst between its rename and its removal
	defer s.localMu.Unlock()
	created := false
	if _, err := os.Stat(dst); errors.Is(err, fs.ErrNotExist) {
		if err := os.Rename(tmp, dst); err != nil {
			return err
		}
		created = true
	} else if err != nil {
		return err
	}
	if err := s.db.WriteTx(ctx, func(tx *db.Tx) error { return record(tx, created) }); err != nil {
		if created {
			os.Remove(dst)
		}
		return err
	}
	return nil
}

// recordUpload writes what an upload's kind records about its file (in the transaction
// that stores it): an artifact's manifest, a run's file; an artifact file is found by its
// MD5 and needs no row.
func (s *Service) recordUpload(ctx context.Context, tx *db.Tx, u Upload, md5hex string, size int64) error {
	switch u.Kind {
	case UploadManifest:
		_, err := tx.Exec(ctx, `UPDATE wandb_artifacts SET manifest_md5 = ?, updated_at = ? WHERE id = ? AND entity = ?`, md5hex, s.nowString(), u.ArtifactID, u.Entity)
		return err
	case UploadRunFile:
		if _, err := tx.Exec(ctx, `DELETE FROM wandb_run_files WHERE entity = ? AND project = ? AND run = ? AND name = ?`, u.Entity, u.Project, u.Run, u.Name); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO wandb_run_files (entity, project, run, name, md5, size, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			u.Entity, u.Project, u.Run, u.Name, md5hex, size, s.nowString())
		return err
	}
	return nil
}

// ---- artifacts ----

// Artifact is one version of an artifact collection.
type Artifact struct {
	ID, Entity, Project, Type, Collection string
	VersionIndex                          int // -1 until committed
	Digest, State, Description            string
	Metadata                              string // JSON object
	RunName                               string
	ManifestMD5                           string // hex; "" until the manifest is uploaded
	Aliases                               []string
	CreatedAt, UpdatedAt                  time.Time
}

// Version is "v<N>" ("" before commit).
func (a Artifact) Version() string {
	if a.VersionIndex < 0 {
		return ""
	}
	return "v" + strconv.Itoa(a.VersionIndex)
}

// SequenceID is the node id of the artifact's collection.
func (a Artifact) SequenceID() string {
	return GlobalID("ArtifactSequence", a.Entity+"/"+a.Project+"/"+a.Collection)
}

const artifactCols = `id, entity, project, type, collection, version_index, digest, state, description, metadata, run_name, manifest_md5, pending_aliases, created_at, updated_at`

func (s *Service) scanArtifacts(ctx context.Context, q string, args ...any) ([]Artifact, error) {
	rows, err := s.db.Query(ctx, `SELECT `+artifactCols+` FROM wandb_artifacts `+q, args...)
	if err != nil {
		return nil, err
	}
	var out []Artifact
	for rows.Next() {
		var a Artifact
		var v sql.NullInt64
		var pending, created, updated string
		if err := rows.Scan(&a.ID, &a.Entity, &a.Project, &a.Type, &a.Collection, &v, &a.Digest, &a.State, &a.Description, &a.Metadata, &a.RunName, &a.ManifestMD5, &pending, &created, &updated); err != nil {
			rows.Close()
			return nil, err
		}
		a.VersionIndex = -1
		if v.Valid {
			a.VersionIndex = int(v.Int64)
		}
		a.CreatedAt, _ = db.ParseTime(created)
		a.UpdatedAt, _ = db.ParseTime(updated)
		out = append(out, a)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Aliases, err = s.aliases(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Service) aliases(ctx context.Context, id string) ([]string, error) {
	rows, err := s.db.Query(ctx, `SELECT alias FROM wandb_artifact_aliases WHERE artifact_id = ? ORDER BY alias`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

func one(as []Artifact, err error) (Artifact, error) {
	if err != nil {
		return Artifact{}, err
	}
	if len(as) == 0 {
		return Artifact{}, ErrNotFound
	}
	return as[0], nil
}

// ArtifactByID returns an artifact of entity by its id.
func (s *Service) ArtifactByID(ctx context.Context, entity, id string) (Artifact, error) {
	return one(s.scanArtifacts(ctx, `WHERE id = ? AND entity = ?`, id, entity))
}

// ArtifactByName returns a committed version of entity's collection: version is "v<N>", an
// alias ("latest" is the newest version), or empty (latest).
func (s *Service) ArtifactByName(ctx context.Context, entity, project, collection, version string) (Artifact, error) {
	if version == "" {
		version = "latest"
	}
	if len(version) > 1 && version[0] == 'v' {
		if n, err := strconv.Atoi(version[1:]); err == nil {
			return one(s.scanArtifacts(ctx, `WHERE entity = ? AND project = ? AND collection = ? AND version_index = ? AND state = 'COMMITTED'`, entity, project, collection, n))
		}
	}
	return one(s.scanArtifacts(ctx, `WHERE id = (SELECT artifact_id FROM wandb_artifact_aliases WHERE entity = ? AND project = ? AND collection = ? AND alias = ?) AND state = 'COMMITTED'`,
		entity, project, collection, version))
}

// Versions lists the committed versions of entity's collection, newest first (type "" = any).
func (s *Service) Versions(ctx context.Context, entity, project, collection, typ string) ([]Artifact, error) {
	q, args := `WHERE entity = ? AND project = ? AND collection = ? AND state = 'COMMITTED'`, []any{entity, project, collection}
	if typ != "" {
		q, args = q+` AND type = ?`, append(args, typ)
	}
	return s.scanArtifacts(ctx, q+` ORDER BY version_index DESC`, args...)
}

// CollectionType returns the type of entity's collection (ErrNotFound when it has no artifact).
func (s *Service) CollectionType(ctx context.Context, entity, project, collection string) (string, error) {
	var t string
	err := s.db.QueryRow(ctx, `SELECT type FROM wandb_artifacts WHERE entity = ? AND project = ? AND collection = ? LIMIT 1`, entity, project, collection).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return "", ErrNotFound
	}
	return t, err
}

// CreateInput is what createArtifact sends.
type CreateInput struct {
	Entity, Project, Type, Collection, Digest, Description, Metadata, RunName string
	Aliases                                                                   []string // set when committed
}

// CreateArtifact creates a pending version, or returns the committed version of the same
// collection with the same digest (W&B's deduplication: the client then uploads nothing).
func (s *Service) CreateArtifact(ctx context.Context, in CreateInput) (Artifact, error) {
	if in.Type == "" || in.Collection == "" || in.Digest == "" {
		return Artifact{}, fault.Invalid("input", "artifactTypeName, artifactCollectionNames and digest are required")
	}
	if strings.ContainsAny(in.Collection, "/:") {
		return Artifact{}, fault.Invalid("input", "artifact name %q may not contain / or :", in.Collection)
	}
	if t, err := s.CollectionType(ctx, in.Entity, in.Project, in.Collection); err == nil && t != in.Type {
		return Artifact{}, fault.Conflict("input", "artifact %s is of type %s, not %s", in.Collection, t, in.Type)
	}
	if a, err := one(s.scanArtifacts(ctx, `WHERE entity = ? AND project = ? AND collection = ? AND digest = ? AND state = 'COMMITTED'`,
		in.Entity, in.Project, in.Collection, in.Digest)); err == nil {
		return a, nil
	}
	if in.Metadata == "" {
		in.Metadata = "{}"
	}
	aliases, _ := json.Marshal(in.Aliases)
	id := GlobalID("Artifact", randomHex(12))
	now := s.nowString()
	_, err := s.db.Exec(ctx, `INSERT INTO wandb_artifacts (id, entity, project, type, collection, version_index, digest, state, description, metadata, pending_aliases, run_name, manifest_md5, size, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, NULL, ?, 'PENDING', ?, ?, ?, ?, '', 0, ?, ?)`,
		id, in.Entity, in.Project, in.Type, in.Collection, in.Digest, in.Description, in.Metadata, string(aliases), in.RunName, now, now)
	if err != nil {
		return Artifact{}, err
	}
	return s.ArtifactByID(ctx, in.Entity, id)
}

// CommitArtifact makes a pending version the collection's next version and its "latest"
// (its manifest must have been uploaded); committing a committed version changes nothing.
func (s *Service) CommitArtifact(ctx context.Context, entity, id string) (Artifact, error) {
	a, err := s.ArtifactByID(ctx, entity, id)
	if err != nil || a.State == "COMMITTED" {
		return a, err
	}
	if a.ManifestMD5 == "" {
		return Artifact{}, fault.Invalid("artifactID", "artifact %s: its manifest was not uploaded", a.Collection)
	}
	m, err := s.Manifest(ctx, a)
	if err != nil {
		return Artifact{}, err
	}
	for name, e := range m.Contents {
		if e.Ref != "" {
			continue
		}
		if _, err := s.BlobPath(entity, MD5Hex(e.Digest)); err != nil {
			return Artifact{}, fault.Invalid("artifactID", "artifact %s: file %s was not uploaded", a.Collection, name)
		}
	}
	err = s.db.WriteTx(ctx, func(tx *db.Tx) error {
		if err := lockCollection(ctx, tx, entity, a.Project, a.Collection); err != nil {
			return err
		}
		var pending string
		var next int
		if err := tx.QueryRow(ctx, `SELECT pending_aliases FROM wandb_artifacts WHERE id = ?`, id).Scan(&pending); err != nil {
			return err
		}
		if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version_index) + 1, 0) FROM wandb_artifacts WHERE entity = ? AND project = ? AND collection = ?`,
			entity, a.Project, a.Collection).Scan(&next); err != nil {
			return err
		}
		var aliases []string
		_ = json.Unmarshal([]byte(pending), &aliases)
		aliases = append(aliases, "latest")
		if _, err := tx.Exec(ctx, `UPDATE wandb_artifacts SET state = 'COMMITTED', version_index = ?, size = ?, updated_at = ? WHERE id = ?`, next, m.Size(), s.nowString(), id); err != nil {
			return err
		}
		return setAliases(ctx, tx, a, aliases)
	})
	if err != nil {
		return Artifact{}, err
	}
	return s.ArtifactByID(ctx, entity, id)
}

func setAliases(ctx context.Context, tx *db.Tx, a Artifact, aliases []string) error {
	for _, al := range aliases {
		if al == "" {
			continue
		}
		if _, err := tx.Exec(ctx, `DELETE FROM wandb_artifact_aliases WHERE entity = ? AND project = ? AND collection = ? AND alias = ?`, a.Entity, a.Project, a.Collection, al); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO wandb_artifact_aliases (entity, project, collection, alias, artifact_id) VALUES (?, ?, ?, ?, ?)`, a.Entity, a.Project, a.Collection, al, a.ID); err != nil {
			return err
		}
	}
	return nil
}

// UpdateArtifact replaces an artifact's metadata and/or description (nil keeps it) and adds
// aliases.
func (s *Service) UpdateArtifact(ctx context.Context, entity, id string, metadata, description *string, aliases []string) (Artifact, error) {
	a, err := s.ArtifactByID(ctx, entity, id)
	if err != nil {
		return a, err
	}
	if metadata != nil && !json.Valid([]byte(*metadata)) {
		return a, fault.Invalid("metadata", "metadata is not JSON")
	}
	err = s.db.WriteTx(ctx, func(tx *db.Tx) error {
		if metadata != nil {
			if _, err := tx.Exec(ctx, `UPDATE wandb_artifacts SET metadata = ?, updated_at = ? WHERE id = ?`, *metadata, s.nowString(), id); err != nil {
				return err
			}
		}
		if description != nil {
			if _, err := tx.Exec(ctx, `UPDATE wandb_artifacts SET description = ?, updated_at = ? WHERE id = ?`, *description, s.nowString(), id); err != nil {
				return err
			}
		}
		return setAliases(ctx, tx, a, aliases)
	})
	if err != nil {
		return a, err
	}
	return s.ArtifactByID(ctx, entity, id)
}

// ManifestEntry is one file of an artifact's manifest.
type ManifestEntry struct {
	Digest          string `json:"digest"`
	Size            int64  `json:"size"`
	BirthArtifactID string `json:"birthArtifactID,omitempty"`
	Ref             string `json:"ref,omitempty"`
}

// Manifest is the manifest the SDK uploads (wandb_manifest.json).
type Manifest struct {
	Version             int                      `json:"version"`
	StoragePolicy       string                   `json:"storagePolicy"`
	StoragePolicyConfig map[string]any           `json:"storagePolicyConfig"`
	Contents            map[string]ManifestEntry `json:"contents"`
}

// Size is the total size of the manifest's files.
func (m Manifest) Size() int64 {
	var n int64
	for _, e := range m.Contents {
		n += e.Size
	}
	return n
}

// Manifest reads an artifact's uploaded manifest.
func (s *Service) Manifest(ctx context.Context, a Artifact) (Manifest, error) {
	p, err := s.BlobPath(a.Entity, a.ManifestMD5)
	if err != nil {
		return Manifest{}, fmt.Errorf("artifact %s: manifest: %w", a.Collection, ErrNotFound)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return Manifest{}, err
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return Manifest{}, fault.Invalid("manifest", "artifact %s: the manifest is not JSON: %v", a.Collection, err)
	}
	return m, nil
}

// ResolveFile returns the path in the blob store of one file of an artifact named
// "<collection>:<version or alias>" (no tag: latest) in entity's project; a missing artifact
// or file is a not-found fault naming it.
func (s *Service) ResolveFile(ctx context.Context, entity, project, nameVersion, file string) (string, error) {
	name, version, _ := strings.Cut(nameVersion, ":")
	a, err := s.ArtifactByName(ctx, entity, project, name, version)
	if errors.Is(err, ErrNotFound) {
		return "", fault.NotFound("", "artifact %s/%s/%s not found", entity, project, nameVersion)
	} else if err != nil {
		return "", err
	}
	m, err := s.Manifest(ctx, a)
	if err != nil {
		return "", err
	}
	e, ok := m.Contents[file]
	if !ok {
		return "", fault.NotFound("", "artifact %s/%s/%s has no file %s", entity, project, nameVersion, file)
	}
	if e.Ref != "" {
		return "", fault.Invalid("", "artifact %s/%s/%s: file %s is a reference to %s, which this server does not fetch", entity, project, nameVersion, file, e.Ref)
	}
	p, err := s.BlobPath(entity, MD5Hex(e.Digest))
	if err != nil {
		return "", fault.NotFound("", "artifact %s/%s/%s: the content of file %s is missing", entity, project, nameVersion, file)
	}
	return p, nil
}
