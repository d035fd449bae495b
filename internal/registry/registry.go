// Package registry keeps the trainable models of the training API (a name in an entity's
// project on top of a served base model) and their checkpoints (LoRA adapters, one per
// training step, stored as PEFT directories under the data directory), in the store.
package registry

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/db"
)

var modelsMigration = db.Migration{Version: 1, SQLite: `
CREATE TABLE train_models (
	id TEXT PRIMARY KEY,
	entity TEXT NOT NULL,
	project TEXT NOT NULL,
	name TEXT NOT NULL,
	base_model TEXT NOT NULL,
	run_id TEXT NOT NULL,
	created_at TEXT NOT NULL,
	UNIQUE (entity, project, name)
);
CREATE TABLE train_checkpoints (
	model_id TEXT NOT NULL,
	step INTEGER NOT NULL,
	id TEXT NOT NULL,
	metrics TEXT NOT NULL,
	created_at TEXT NOT NULL,
	PRIMARY KEY (model_id, step)
)`}

// Errors.
var (
	ErrNotFound = errors.New("registry: not found")
	ErrExists   = errors.New("registry: a model of that name exists")
)

// Model is a trainable model.
type Model struct {
	ID        string `json:"id"`
	Entity    string `json:"entity"`
	Project   string `json:"project"`
	Name      string `json:"name"`
	BaseModel string `json:"base_model"`
	RunID     string `json:"run_id"`
	CreatedAt string `json:"created_at"`
}

// Checkpoint is one training step's adapter.
type Checkpoint struct {
	ID        string             `json:"id"`
	Step      int                `json:"step"`
	Metrics   map[string]float64 `json:"metrics"`
	CreatedAt string             `json:"created_at"`
}

// Registry is the models and checkpoints service.
type Registry struct {
	db  *db.DB
	dir string // checkpoints live under dir/<model id>/step<N>
	now func() time.Time

	blobs    BlobCache // set by UseBlobs: checkpoint files are shared blobs (blobs.go)
	cacheDir string    // where CheckpointPath puts checkpoints together from blobs

	mu      sync.Mutex
	checked map[string]bool // directories under cacheDir checked by this process
}

// New opens the registry on d, migrating its tables, with checkpoint files under dir.
func New(ctx context.Context, d *db.DB, dir string) (*Registry, error) {
	if err := d.Migrate(ctx, "registry", []db.Migration{modelsMigration, resumeMigration, aliasMigration}); err != nil {
		return nil, err
	}
	return &Registry{db: d, dir: dir, now: time.Now}, nil
}

// CheckpointDir is where the adapter of a model's step lives.
func (r *Registry) CheckpointDir(modelID string, step int) string {
	return filepath.Join(r.dir, modelID, "step"+strconv.Itoa(step))
}

// Create adds a model; with returnExisting an existing one of the same name is returned
// (created false), otherwise it is ErrExists.
func (r *Registry) Create(ctx context.Context, m Model, returnExisting bool) (Model, bool, error) {
	m.ID = uuid.Must(uuid.NewV7()).String()
	m.RunID = strings.ReplaceAll(uuid.NewString(), "-", "")[:8]
	m.CreatedAt = db.FormatTime(r.now())
	_, err := r.db.Exec(ctx, `INSERT INTO train_models (id, entity, project, name, base_model, run_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		m.ID, m.Entity, m.Project, m.Name, m.BaseModel, m.RunID, m.CreatedAt)
	if db.IsUniqueViolation(err) {
		old, gerr := r.ByName(ctx, m.Entity, m.Project, m.Name)
		if gerr != nil {
			return Model{}, false, gerr
		}
		if returnExisting {
			return old, false, nil
		}
		return old, false, ErrExists
	}
	if err != nil {
		return Model{}, false, err
	}
	return m, true, nil
}

const modelCols = `id, entity, project, name, base_model, run_id, created_at`

func scanModel(row interface{ Scan(...any) error }) (Model, error) {
	var m Model
	err := row.Scan(&m.ID, &m.Entity, &m.Project, &m.Name, &m.BaseModel, &m.RunID, &m.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return m, ErrNotFound
	}
	return m, err
}

// Get returns a model by id.
func (r *Registry) Get(ctx context.Context, id string) (Model, error) {
	return scanModel(r.db.QueryRow(ctx, `SELECT `+modelCols+` FROM train_models WHERE id = ?`, id))
}

// ByName returns a model by entity, project and name.
func (r *Registry) ByName(ctx context.Context, entity, project, name string) (Model, error) {
	return scanModel(r.db.QueryRow(ctx, `SELECT `+modelCols+` FROM train_models WHERE entity = ? AND project = ? AND name = ?`, entity, project, name))
}

// Resolve finds a model by id or `<entity>/<project>/<name>`.
func (r *Registry) Resolve(ctx context.Context, ref string) (Model, error) {
	if parts := strings.Split(ref, "/"); len(parts) == 3 {
		return r.ByName(ctx, parts[0], parts[1], parts[2])
	}
	return r.Get(ctx, ref)
}

// List returns an entity's models, newest first.
func (r *Registry) List(ctx context.Context, entity string) ([]Model, error) {
	return r.models(ctx, `WHERE entity = ? ORDER BY created_at DESC, id DESC`, entity)
}

// AllModels lists every model of every entity, oldest first.
func (r *Registry) AllModels(ctx context.Context) ([]Model, error) {
	return r.models(ctx, `ORDER BY created_at, id`)
}

// models runs a query of models (where: its WHERE and ORDER BY clauses).
func (r *Registry) models(ctx context.Context, where string, args ...any) ([]Model, error) {
	rows, err := r.db.Query(ctx, `SELECT `+modelCols+` FROM train_models `+where, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Model
	for rows.Next() {
		m, err := scanModel(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Delete removes a model, its checkpoints and their files (and its jobs' resume states); it
// returns how many checkpoints went.
func (r *Registry) Delete(ctx context.Context, id string) (int, error) {
	n := 0
	err := r.db.WriteTx(ctx, func(tx *db.Tx) error {
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM train_checkpoints WHERE model_id = ?`, id).Scan(&n); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM train_checkpoints WHERE model_id = ?`, id); err != nil {
			return err
		}
		if err := deleteResumeTx(ctx, tx, `model_id = ?`, id); err != nil {
			return err
		}
		for _, t := range []string{"train_aliases", "train_alias_events"} { // aliases.go
			if _, err := tx.Exec(ctx, `DELETE FROM `+t+` WHERE model_id = ?`, id); err != nil {
				return err
			}
		}
		res, err := tx.Exec(ctx, `DELETE FROM train_models WHERE id = ?`, id)
		if err != nil {
			return err
		}
		if k, _ := res.RowsAffected(); k == 0 {
			return ErrNotFound
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	r.dropFiles(ctx)
	return n, os.RemoveAll(filepath.Join(r.dir, id))
}

// AddCheckpoint records the adapter written at CheckpointDir(modelID, step); with a shared
// blob store (UseBlobs) its files are stored first and the directory removed.
func (r *Registry) AddCheckpoint(ctx context.Context, modelID string, step int, metrics map[string]float64) (Checkpoint, error) {
	if metrics == nil {
		metrics = map[string]float64{}
	}
	c := Checkpoint{ID: uuid.Must(uuid.NewV7()).String(), Step: step, Metrics: metrics, CreatedAt: db.FormatTime(r.now())}
	js, _ := json.Marshal(metrics)
	if r.blobs != nil {
		return c, r.addBlobCheckpoint(ctx, modelID, c, string(js))
	}
	_, err := r.db.Exec(ctx, `INSERT INTO train_checkpoints (model_id, step, id, metrics, created_at) VALUES (?, ?, ?, ?, ?)`,
		modelID, step, c.ID, string(js), c.CreatedAt)
	return c, err
}

// Latest returns the checkpoint with the highest step (ErrNotFound when none).
func (r *Registry) Latest(ctx context.Context, modelID string) (Checkpoint, error) {
	cs, _, err := r.Checkpoints(ctx, modelID, "", 1, "desc")
	if err != nil {
		return Checkpoint{}, err
	}
	if len(cs) == 0 {
		return Checkpoint{}, ErrNotFound
	}
	return cs[0], nil
}

// Step returns one checkpoint.
func (r *Registry) Step(ctx context.Context, modelID string, step int) (Checkpoint, error) {
	var c Checkpoint
	var metrics string
	err := r.db.QueryRow(ctx, `SELECT id, step, metrics, created_at FROM train_checkpoints WHERE model_id = ? AND step = ?`, modelID, step).
		Scan(&c.ID, &c.Step, &metrics, &c.CreatedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return c, ErrNotFound
	}
	json.Unmarshal([]byte(metrics), &c.Metrics)
	return c, err
}

// Checkpoints lists a model's checkpoints by step in order ("asc" or "desc"), after the
// checkpoint with id after (a cursor), at most limit; more tells whether others follow.
func (r *Registry) Checkpoints(ctx context.Context, modelID, after string, limit int, order string) ([]Checkpoint, bool, error) {
	op, dir := ">", "ASC"
	if order == "desc" {
		op, dir = "<", "DESC"
	}
	q := `SELECT id, step, metrics, created_at FROM train_checkpoints WHERE model_id = ?`
	args := []any{modelID}
	if after != "" {
		var step int
		err := r.db.QueryRow(ctx, `SELECT step FROM train_checkpoints WHERE model_id = ? AND id = ?`, modelID, after).Scan(&step)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, false, fmt.Errorf("%w: checkpoint %s", ErrNotFound, after)
		}
		if err != nil {
			return nil, false, err
		}
		q += ` AND step ` + op + ` ?`
		args = append(args, step)
	}
	q += ` ORDER BY step ` + dir + ` LIMIT ?`
	args = append(args, limit+1)
	rows, err := r.db.Query(ctx, q, args...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	var out []Checkpoint
	for rows.Next() {
		var c Checkpoint
		var metrics string
		if err := rows.Scan(&c.ID, &c.Step, &metrics, &c.CreatedAt); err != nil {
			return nil, false, err
		}
		c.Metrics = map[string]float64{}
		json.Unmarshal([]byte(metrics), &c.Metrics)
		out = append(out, c)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, rows.Err()
}

// DeleteCheckpoints removes the given steps (and their files); it returns how many went and
// the steps that did not exist.
func (r *Registry) DeleteCheckpoints(ctx context.Context, modelID string, steps []int) (int, []int, error) {
	deleted, missing := 0, []int{}
	var gone []int
	err := r.db.WriteTx(ctx, func(tx *db.Tx) error {
		deleted, missing, gone = 0, []int{}, nil
		for _, s := range steps {
			// A checkpoint an alias points at stays (aliases.go): the row is locked first, so
			// that an alias moved onto it meanwhile is seen.
			var one int
			tx.QueryRow(ctx, `SELECT step FROM train_checkpoints WHERE model_id = ? AND step = ?`+forUpdate(tx), modelID, s).Scan(&one)
			aliased, err := aliasedSteps(ctx, tx, modelID)
			if err != nil {
				return err
			}
			if names := aliased[s]; len(names) > 0 {
				return &AliasedError{Step: s, Aliases: names}
			}
			res, err := tx.Exec(ctx, `DELETE FROM train_checkpoints WHERE model_id = ? AND step = ?`, modelID, s)
			if err != nil {
				return err
			}
			if k, _ := res.RowsAffected(); k == 0 {
				missing = append(missing, s)
			} else {
				deleted++
				gone = append(gone, s)
			}
		}
		return nil
	})
	if err != nil {
		return 0, nil, err
	}
	r.dropFiles(ctx)
	// Only the files of registered steps: an unregistered step's directory may be the one a
	// trainer has just put in place and is about to register.
	for _, s := range gone {
		os.RemoveAll(r.CheckpointDir(modelID, s))
	}
	return deleted, missing, nil
}

// MergeMetrics adds metrics to a checkpoint's (later values win).
func (r *Registry) MergeMetrics(ctx context.Context, modelID string, step int, metrics map[string]float64) error {
	return r.db.WriteTx(ctx, func(tx *db.Tx) error {
		var cur string
		if err := tx.QueryRow(ctx, `SELECT metrics FROM train_checkpoints WHERE model_id = ? AND step = ?`, modelID, step).Scan(&cur); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNotFound
			}
			return err
		}
		m := map[string]float64{}
		json.Unmarshal([]byte(cur), &m)
		for k, v := range metrics {
			m[k] = v
		}
		js, _ := json.Marshal(m)
		_, err := tx.Exec(ctx, `UPDATE train_checkpoints SET metrics = ? WHERE model_id = ? AND step = ?`, string(js), modelID, step)
		return err
	})
}

// ErrNoMetric is returned by Prune when no checkpoint has the metric.
var ErrNoMetric = errors.New("registry: no checkpoint has the metric")

// PruneResult says which checkpoints Prune kept and deleted, by step.
type PruneResult struct {
	Kept    []int `json:"kept_steps"`
	Deleted []int `json:"deleted_steps"`
	// Best are the kept steps chosen by the metric, best first.
	Best []int `json:"best_steps"`
}

// PrunePlan chooses, as ART's delete_checkpoints does, the checkpoints to keep: the latest
// step, and the keepBest steps with the highest value of metric (ties go to the later step);
// checkpoints without the metric are never among the best. It fails with ErrNoMetric when no
// checkpoint has the metric (and there is more than the latest to prune).
func PrunePlan(cs []Checkpoint, metric string, keepBest int) (PruneResult, error) {
	res := PruneResult{Kept: []int{}, Deleted: []int{}, Best: []int{}}
	if len(cs) == 0 {
		return res, nil
	}
	latest := cs[0].Step
	var scored []Checkpoint
	for _, c := range cs {
		latest = max(latest, c.Step)
		if _, ok := c.Metrics[metric]; ok {
			scored = append(scored, c)
		}
	}
	if len(scored) == 0 && len(cs) > 1 {
		return res, ErrNoMetric
	}
	sort.SliceStable(scored, func(i, j int) bool {
		a, b := scored[i].Metrics[metric], scored[j].Metrics[metric]
		if a != b {
			return a > b
		}
		return scored[i].Step > scored[j].Step
	})
	keep := map[int]bool{latest: true}
	for _, c := range scored[:min(keepBest, len(scored))] {
		keep[c.Step] = true
		res.Best = append(res.Best, c.Step)
	}
	for _, c := range cs {
		if keep[c.Step] {
			res.Kept = append(res.Kept, c.Step)
		} else {
			res.Deleted = append(res.Deleted, c.Step)
		}
	}
	sort.Ints(res.Kept)
	sort.Ints(res.Deleted)
	return res, nil
}

// AllCheckpoints lists every checkpoint of a model by step, ascending.
func (r *Registry) AllCheckpoints(ctx context.Context, modelID string) ([]Checkpoint, error) {
	var all []Checkpoint
	after := ""
	for {
		cs, more, err := r.Checkpoints(ctx, modelID, after, 1000, "asc")
		if err != nil {
			return nil, err
		}
		all = append(all, cs...)
		if !more || len(cs) == 0 {
			return all, nil
		}
		after = cs[len(cs)-1].ID
	}
}

// Prune deletes every checkpoint of a model but the latest and the keepBest best by metric
// (PrunePlan), with their files.
func (r *Registry) Prune(ctx context.Context, modelID, metric string, keepBest int) (PruneResult, error) {
	cs, err := r.AllCheckpoints(ctx, modelID)
	if err != nil {
		return PruneResult{}, err
	}
	res, err := PrunePlan(cs, metric, keepBest)
	if err != nil || len(res.Deleted) == 0 {
		return res, err
	}
	// The checkpoints aliases point at are kept too (aliases.go).
	aliased, err := r.AliasedSteps(ctx, modelID)
	if err != nil {
		return PruneResult{}, err
	}
	var del []int
	for _, s := range res.Deleted {
		if len(aliased[s]) > 0 {
			res.Kept = append(res.Kept, s)
		} else {
			del = append(del, s)
		}
	}
	sort.Ints(res.Kept)
	res.Deleted = append([]int{}, del...)
	if len(res.Deleted) == 0 {
		return res, nil
	}
	if _, _, err := r.DeleteCheckpoints(ctx, modelID, res.Deleted); err != nil {
		return PruneResult{}, err
	}
	return res, nil
}
