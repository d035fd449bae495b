package registry

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/db"
)

// A job's resume state is what a training job that stopped in its middle (a shutdown, a
// worker that died) needs to go on from where it stopped instead of from its start: a
// directory the trainer writes whole (the adapter, the optimizer state and a file saying
// how far the job got), one per job, replaced at each save. Without a shared blob store the
// directory under ResumeDir is the state. With one (several nodes), StoreResume keeps its
// files as blobs and replaces the job's earlier state in one transaction, so that whichever
// node runs the job next reads the latest whole state; ResumePath puts it together from
// the node's blob cache.

var resumeMigration = db.Migration{Version: 2, SQLite: `
CREATE TABLE train_resume (
	job_id TEXT PRIMARY KEY,
	model_id TEXT NOT NULL,
	id TEXT NOT NULL,
	created_at TEXT NOT NULL
);
CREATE TABLE train_resume_files (
	resume_id TEXT NOT NULL,
	name TEXT NOT NULL,
	hash TEXT NOT NULL,
	size BIGINT NOT NULL,
	PRIMARY KEY (resume_id, name)
)`}

// ResumeDir is where the trainer of a job writes its resume state (a whole directory,
// replaced at once), before StoreResume.
func (r *Registry) ResumeDir(modelID, jobID string) string {
	return filepath.Join(r.dir, modelID, "resume", jobID)
}

// StoreResume keeps the state written at ResumeDir as the job's latest: with a shared blob
// store its files become blobs, the job's earlier state is replaced in one transaction, and
// the directory is removed; without one there is nothing more to do.
func (r *Registry) StoreResume(ctx context.Context, modelID, jobID string) error {
	if r.blobs == nil {
		return nil
	}
	dir := r.ResumeDir(modelID, jobID)
	files, err := r.putDir(ctx, dir, "resume state")
	if err != nil {
		return err
	}
	id := uuid.Must(uuid.NewV7()).String()
	var old string
	err = r.db.WriteTx(ctx, func(tx *db.Tx) error {
		err := tx.QueryRow(ctx, `SELECT id FROM train_resume WHERE job_id = ?`, jobID).Scan(&old)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return err
		}
		if err := deleteResumeTx(ctx, tx, `job_id = ?`, jobID); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO train_resume (job_id, model_id, id, created_at) VALUES (?, ?, ?, ?)`,
			jobID, modelID, id, db.FormatTime(r.now())); err != nil {
			return err
		}
		for _, f := range files {
			if _, err := tx.Exec(ctx, `INSERT INTO train_resume_files (resume_id, name, hash, size) VALUES (?, ?, ?, ?)`,
				id, f.name, f.info.Hash, f.info.Size); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if old != "" {
		r.forgetAssembled(filepath.Join(r.cacheDir, "resume", old))
	}
	return os.RemoveAll(dir)
}

// deleteResumeTx removes the resume states (and their file rows) matching where.
func deleteResumeTx(ctx context.Context, tx *db.Tx, where string, args ...any) error {
	if _, err := tx.Exec(ctx, `DELETE FROM train_resume_files WHERE resume_id IN (SELECT id FROM train_resume WHERE `+where+`)`, args...); err != nil {
		return err
	}
	_, err := tx.Exec(ctx, `DELETE FROM train_resume WHERE `+where, args...)
	return err
}

// ResumePath returns a local directory holding the job's latest resume state, ErrNotFound
// when it has none.
func (r *Registry) ResumePath(ctx context.Context, modelID, jobID string) (string, error) {
	if r.blobs == nil {
		dir := r.ResumeDir(modelID, jobID)
		if _, err := os.Stat(dir); err != nil {
			return "", fmt.Errorf("%w: no resume state of job %s", ErrNotFound, jobID)
		}
		return dir, nil
	}
	var id string
	err := r.db.QueryRow(ctx, `SELECT id FROM train_resume WHERE job_id = ? AND model_id = ?`, jobID, modelID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: no resume state of job %s", ErrNotFound, jobID)
	}
	if err != nil {
		return "", err
	}
	names, hashes, err := r.fileList(ctx, `SELECT name, hash FROM train_resume_files WHERE resume_id = ? ORDER BY name`, id)
	if err != nil {
		return "", err
	}
	dst := filepath.Join(r.cacheDir, "resume", id)
	if err := r.ensureAssembled(ctx, dst, names, hashes); err != nil {
		return "", fmt.Errorf("registry: resume state of job %s: %w", jobID, err)
	}
	return dst, nil
}

// DropResume forgets the resume state of a job (one that ended), and DropResumes those of
// every job of the model but keepJob: a model's jobs run one at a time in the order they
// were queued, so when one starts, the states of the others are of jobs that ended
// (cancelled ones among them) and would never be read.
func (r *Registry) DropResume(ctx context.Context, modelID, jobID string) error {
	return r.dropResumes(ctx, modelID, func(j string) bool { return j == jobID })
}

// DropResumes: see DropResume.
func (r *Registry) DropResumes(ctx context.Context, modelID, keepJob string) error {
	return r.dropResumes(ctx, modelID, func(j string) bool { return j != keepJob })
}

func (r *Registry) dropResumes(ctx context.Context, modelID string, drop func(jobID string) bool) error {
	var errs []error
	root := filepath.Join(r.dir, modelID, "resume")
	if entries, err := os.ReadDir(root); err == nil {
		for _, e := range entries {
			if drop(e.Name()) {
				errs = append(errs, os.RemoveAll(filepath.Join(root, e.Name())))
			}
		}
	}
	if r.blobs == nil {
		return errors.Join(errs...)
	}
	rows, err := r.db.Query(ctx, `SELECT job_id, id FROM train_resume WHERE model_id = ?`, modelID)
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	var jobs, ids []string
	for rows.Next() {
		var j, id string
		if err := rows.Scan(&j, &id); err != nil {
			rows.Close()
			return errors.Join(append(errs, err)...)
		}
		if drop(j) {
			jobs, ids = append(jobs, j), append(ids, id)
		}
	}
	rows.Close()
	for i, j := range jobs {
		err := r.db.WriteTx(ctx, func(tx *db.Tx) error {
			return deleteResumeTx(ctx, tx, `job_id = ? AND id = ?`, j, ids[i])
		})
		errs = append(errs, err)
		r.forgetAssembled(filepath.Join(r.cacheDir, "resume", ids[i]))
	}
	return errors.Join(errs...)
}

// forgetAssembled removes a directory put together from blobs that no row names any more.
func (r *Registry) forgetAssembled(dst string) {
	r.mu.Lock()
	delete(r.checked, dst)
	r.mu.Unlock()
	_ = os.RemoveAll(dst)
}
