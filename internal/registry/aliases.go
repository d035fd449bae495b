package registry

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/db"
)

// Aliases name a model's checkpoints (local/p/agent:prod): chat resolves them like :latest,
// and every move is an event with who made it and why, in the transaction that moves it. An
// alias may carry a promotion rule (kept here as JSON; internal/loop reads and applies it).

var aliasMigration = db.Migration{Version: 3, SQLite: `
CREATE TABLE train_aliases (
	model_id TEXT NOT NULL,
	name TEXT NOT NULL,
	step INTEGER NOT NULL,
	rule TEXT,
	updated_at TEXT NOT NULL,
	updated_by TEXT NOT NULL,
	reason TEXT NOT NULL,
	PRIMARY KEY (model_id, name)
);
CREATE TABLE train_alias_events (
	model_id TEXT NOT NULL,
	id TEXT NOT NULL,
	alias TEXT NOT NULL,
	kind TEXT NOT NULL,
	from_step INTEGER,
	to_step INTEGER,
	actor TEXT NOT NULL,
	reason TEXT NOT NULL,
	data TEXT NOT NULL,
	created_at TEXT NOT NULL,
	PRIMARY KEY (model_id, id)
);
CREATE INDEX train_alias_events_alias ON train_alias_events (model_id, alias, id)`}

// Alias event kinds.
const (
	AliasSet      = "set"      // created or moved by hand (API, CLI, Studio)
	AliasRollback = "rollback" // moved back to the step it pointed at before
	AliasPromoted = "promoted" // moved by its promotion rule
	AliasKept     = "kept"     // its promotion rule decided not to move it
	AliasRule     = "rule"     // its promotion rule set, changed or removed
	AliasDeleted  = "deleted"
)

// Alias is a name for one of a model's checkpoints (step 0: the base model).
type Alias struct {
	Name      string          `json:"alias"`
	Step      int             `json:"step"`
	Rule      json.RawMessage `json:"rule"`
	UpdatedAt string          `json:"updated_at"`
	UpdatedBy string          `json:"updated_by"`
	Reason    string          `json:"reason"`
}

// AliasEvent is one change of an alias (or a promotion rule's decision to keep it), with who
// made it and why; Data holds what a promotion compared.
type AliasEvent struct {
	ID        string          `json:"id"`
	Alias     string          `json:"alias"`
	Kind      string          `json:"kind"`
	From      *int            `json:"from_step"`
	To        *int            `json:"to_step"`
	Actor     string          `json:"actor"`
	Reason    string          `json:"reason"`
	Data      json.RawMessage `json:"data"`
	CreatedAt string          `json:"created_at"`
}

// Alias errors.
var (
	// ErrNoStep: the step to point an alias at is not a checkpoint of the model.
	ErrNoStep = errors.New("registry: no such checkpoint")
	// ErrAliasMoved: the alias no longer points where the caller expected.
	ErrAliasMoved = errors.New("registry: the alias moved")
)

// AliasedError is returned when deleting checkpoints that aliases point at.
type AliasedError struct {
	Step    int
	Aliases []string
}

func (e *AliasedError) Error() string {
	return fmt.Sprintf("checkpoint step %d is aliased as %s", e.Step, strings.Join(e.Aliases, ", "))
}

var aliasName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
var stepTag = regexp.MustCompile(`^step[0-9]+$`)

// ValidAliasName tells whether name may be an alias: lower-case letters, digits, '_', '-'
// and '.', at most 64, not latest and not step<N>.
func ValidAliasName(name string) bool {
	return aliasName.MatchString(name) && name != "latest" && !stepTag.MatchString(name)
}

func forUpdate(tx *db.Tx) string {
	if tx.Dialect() == db.Postgres {
		return " FOR UPDATE"
	}
	return ""
}

const aliasCols = `name, step, rule, updated_at, updated_by, reason`

func scanAlias(row interface{ Scan(...any) error }) (Alias, error) {
	var a Alias
	var rule sql.NullString
	err := row.Scan(&a.Name, &a.Step, &rule, &a.UpdatedAt, &a.UpdatedBy, &a.Reason)
	if errors.Is(err, sql.ErrNoRows) {
		return a, ErrNotFound
	}
	if rule.Valid && rule.String != "" {
		a.Rule = json.RawMessage(rule.String)
	}
	return a, err
}

// Aliases lists a model's aliases by name.
func (r *Registry) Aliases(ctx context.Context, modelID string) ([]Alias, error) {
	rows, err := r.db.Query(ctx, `SELECT `+aliasCols+` FROM train_aliases WHERE model_id = ? ORDER BY name`, modelID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Alias{}
	for rows.Next() {
		a, err := scanAlias(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Alias returns one alias (ErrNotFound).
func (r *Registry) Alias(ctx context.Context, modelID, name string) (Alias, error) {
	return scanAlias(r.db.QueryRow(ctx, `SELECT `+aliasCols+` FROM train_aliases WHERE model_id = ? AND name = ?`, modelID, name))
}

// AliasStep is the step an alias points at (ErrNotFound for an unknown alias).
func (r *Registry) AliasStep(ctx context.Context, modelID, name string) (int, error) {
	a, err := r.Alias(ctx, modelID, name)
	return a.Step, err
}

// MoveAlias points alias name of a model at step (0: the base model), creating it, and
// records ev (its Alias, From and To filled in) in the same transaction. With expect set the
// alias must point at *expect now (ErrAliasMoved otherwise; a missing alias is expected at
// nothing). A step that is not a checkpoint is ErrNoStep.
func (r *Registry) MoveAlias(ctx context.Context, modelID, name string, step int, ev AliasEvent, expect *int) (Alias, error) {
	var out Alias
	err := r.db.WriteTx(ctx, func(tx *db.Tx) error {
		if step != 0 {
			var s int
			err := tx.QueryRow(ctx, `SELECT step FROM train_checkpoints WHERE model_id = ? AND step = ?`+forUpdate(tx), modelID, step).Scan(&s)
			if errors.Is(err, sql.ErrNoRows) {
				return ErrNoStep
			}
			if err != nil {
				return err
			}
		}
		cur, err := scanAlias(tx.QueryRow(ctx, `SELECT `+aliasCols+` FROM train_aliases WHERE model_id = ? AND name = ?`+forUpdate(tx), modelID, name))
		exists := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		if expect != nil && (!exists || cur.Step != *expect) {
			return ErrAliasMoved
		}
		now := db.FormatTime(r.now())
		if exists {
			if _, err := tx.Exec(ctx, `UPDATE train_aliases SET step = ?, updated_at = ?, updated_by = ?, reason = ? WHERE model_id = ? AND name = ?`,
				step, now, ev.Actor, ev.Reason, modelID, name); err != nil {
				return err
			}
			from := cur.Step
			ev.From = &from
		} else if _, err := tx.Exec(ctx, `INSERT INTO train_aliases (model_id, name, step, rule, updated_at, updated_by, reason) VALUES (?, ?, ?, NULL, ?, ?, ?)`,
			modelID, name, step, now, ev.Actor, ev.Reason); err != nil {
			return err
		}
		to := step
		ev.Alias, ev.To = name, &to
		if err := r.addAliasEventTx(ctx, tx, modelID, &ev); err != nil {
			return err
		}
		out, err = scanAlias(tx.QueryRow(ctx, `SELECT `+aliasCols+` FROM train_aliases WHERE model_id = ? AND name = ?`, modelID, name))
		return err
	})
	return out, err
}

// SetAliasRule sets (or, with rule nil, removes) an alias's promotion rule and records ev.
func (r *Registry) SetAliasRule(ctx context.Context, modelID, name string, rule json.RawMessage, ev AliasEvent) (Alias, error) {
	var out Alias
	err := r.db.WriteTx(ctx, func(tx *db.Tx) error {
		cur, err := scanAlias(tx.QueryRow(ctx, `SELECT `+aliasCols+` FROM train_aliases WHERE model_id = ? AND name = ?`+forUpdate(tx), modelID, name))
		if err != nil {
			return err
		}
		var v any
		if rule != nil {
			v = string(rule)
		}
		if _, err := tx.Exec(ctx, `UPDATE train_aliases SET rule = ? WHERE model_id = ? AND name = ?`, v, modelID, name); err != nil {
			return err
		}
		step := cur.Step
		ev.Alias, ev.From, ev.To = name, &step, &step
		if err := r.addAliasEventTx(ctx, tx, modelID, &ev); err != nil {
			return err
		}
		out, err = scanAlias(tx.QueryRow(ctx, `SELECT `+aliasCols+` FROM train_aliases WHERE model_id = ? AND name = ?`, modelID, name))
		return err
	})
	return out, err
}

// DeleteAlias removes an alias and records ev (its history stays).
func (r *Registry) DeleteAlias(ctx context.Context, modelID, name string, ev AliasEvent) error {
	return r.db.WriteTx(ctx, func(tx *db.Tx) error {
		cur, err := scanAlias(tx.QueryRow(ctx, `SELECT `+aliasCols+` FROM train_aliases WHERE model_id = ? AND name = ?`+forUpdate(tx), modelID, name))
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM train_aliases WHERE model_id = ? AND name = ?`, modelID, name); err != nil {
			return err
		}
		step := cur.Step
		ev.Alias, ev.From, ev.Kind = name, &step, AliasDeleted
		return r.addAliasEventTx(ctx, tx, modelID, &ev)
	})
}

// RecordAliasEvent records an event that moves nothing (a promotion rule kept the alias).
func (r *Registry) RecordAliasEvent(ctx context.Context, modelID string, ev AliasEvent) (AliasEvent, error) {
	err := r.db.WriteTx(ctx, func(tx *db.Tx) error { return r.addAliasEventTx(ctx, tx, modelID, &ev) })
	return ev, err
}

func (r *Registry) addAliasEventTx(ctx context.Context, tx *db.Tx, modelID string, ev *AliasEvent) error {
	ev.ID = uuid.Must(uuid.NewV7()).String()
	ev.CreatedAt = db.FormatTime(r.now())
	if len(ev.Data) == 0 {
		ev.Data = json.RawMessage(`{}`)
	}
	_, err := tx.Exec(ctx, `INSERT INTO train_alias_events (model_id, id, alias, kind, from_step, to_step, actor, reason, data, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		modelID, ev.ID, ev.Alias, ev.Kind, ev.From, ev.To, ev.Actor, ev.Reason, string(ev.Data), ev.CreatedAt)
	return err
}

// AliasEvents lists a model's alias events, newest first: of one alias (or every alias with
// alias ""), older than the event with id before, at most limit; more tells whether others
// follow.
func (r *Registry) AliasEvents(ctx context.Context, modelID, alias, before string, limit int) ([]AliasEvent, bool, error) {
	q := `SELECT id, alias, kind, from_step, to_step, actor, reason, data, created_at FROM train_alias_events WHERE model_id = ?`
	args := []any{modelID}
	if alias != "" {
		q += ` AND alias = ?`
		args = append(args, alias)
	}
	if before != "" {
		q += ` AND id < ?`
		args = append(args, before)
	}
	q += ` ORDER BY id DESC LIMIT ?`
	args = append(args, limit+1)
	rows, err := r.db.Query(ctx, q, args...)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	out := []AliasEvent{}
	for rows.Next() {
		var e AliasEvent
		var from, to sql.NullInt64
		var data string
		if err := rows.Scan(&e.ID, &e.Alias, &e.Kind, &from, &to, &e.Actor, &e.Reason, &data, &e.CreatedAt); err != nil {
			return nil, false, err
		}
		if from.Valid {
			f := int(from.Int64)
			e.From = &f
		}
		if to.Valid {
			t := int(to.Int64)
			e.To = &t
		}
		e.Data = json.RawMessage(data)
		out = append(out, e)
	}
	more := len(out) > limit
	if more {
		out = out[:limit]
	}
	return out, more, rows.Err()
}

// aliasedStepsTx maps each aliased step of a model to its aliases' names.
func aliasedSteps(ctx context.Context, q interface {
	Query(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}, modelID string) (map[int][]string, error) {
	rows, err := q.Query(ctx, `SELECT step, name FROM train_aliases WHERE model_id = ? ORDER BY name`, modelID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int][]string{}
	for rows.Next() {
		var step int
		var name string
		if err := rows.Scan(&step, &name); err != nil {
			return nil, err
		}
		out[step] = append(out[step], name)
	}
	return out, rows.Err()
}

// AliasedSteps maps each step a model's aliases point at to their names.
func (r *Registry) AliasedSteps(ctx context.Context, modelID string) (map[int][]string, error) {
	return aliasedSteps(ctx, r.db, modelID)
}
