// Package respstore keeps the responses of the Responses API that ask to be stored (`store`,
// true by default as in OpenAI's API), per entity, in the store (SQLite or PostgreSQL): a later
// request continues one (`previous_response_id`) on any node, and GET and DELETE
// /v1/responses/{id} read and remove them; DeleteOlder expires them (hone serve keeps them
// --responses-retention, 30 days by default, as OpenAI does). A record holds the conversation the response ends
// (chat messages: the history it continued, its input, its output), its input items and the
// response object. No HTTP here (internal/chatapi answers the routes).
package respstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/honeai/hone/internal/db"
)

// ErrNotFound is returned for a response that does not exist, or is another entity's.
var ErrNotFound = errors.New("respstore: not found")

var migrations = []db.Migration{{Version: 1, SQLite: `
CREATE TABLE stored_responses (
	id TEXT PRIMARY KEY,
	entity TEXT NOT NULL,
	model TEXT NOT NULL,
	conversation TEXT NOT NULL,
	input_items TEXT NOT NULL,
	response TEXT NOT NULL,
	created_at TEXT NOT NULL
);
CREATE INDEX stored_responses_entity ON stored_responses (entity, created_at)`}}

// Record is one stored response.
type Record struct {
	ID, Entity, Model string
	// Conversation is the chat messages the response ends: the conversation it continued
	// (without instructions, which are not carried over), its input, then its output.
	Conversation json.RawMessage
	InputItems   json.RawMessage // the request's input, as items
	Response     json.RawMessage // the response object
	CreatedAt    time.Time
}

// Store keeps stored responses.
type Store struct {
	db  *db.DB
	now func() time.Time
}

// Open migrates the table on d.
func Open(ctx context.Context, d *db.DB) (*Store, error) {
	if err := d.Migrate(ctx, "respstore", migrations); err != nil {
		return nil, err
	}
	return &Store{db: d, now: time.Now}, nil
}

// Put stores a response (replacing one of the same id).
func (s *Store) Put(ctx context.Context, r Record) error {
	if r.CreatedAt.IsZero() {
		r.CreatedAt = s.now()
	}
	return s.db.WriteTx(ctx, func(tx *db.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM stored_responses WHERE id = ?`, r.ID); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO stored_responses (id, entity, model, conversation, input_items, response, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.Entity, r.Model, string(r.Conversation), string(r.InputItems), string(r.Response), db.FormatTime(r.CreatedAt))
		return err
	})
}

// Get returns entity's response id.
func (s *Store) Get(ctx context.Context, entity, id string) (Record, error) {
	r := Record{ID: id, Entity: entity}
	var conv, items, resp, created string
	err := s.db.QueryRow(ctx, `SELECT model, conversation, input_items, response, created_at FROM stored_responses WHERE id = ? AND entity = ?`, id, entity).
		Scan(&r.Model, &conv, &items, &resp, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, err
	}
	r.Conversation, r.InputItems, r.Response = json.RawMessage(conv), json.RawMessage(items), json.RawMessage(resp)
	r.CreatedAt, _ = db.ParseTime(created)
	return r, nil
}

// Delete removes entity's response id (ErrNotFound when there is none).
func (s *Store) Delete(ctx context.Context, entity, id string) error {
	res, err := s.db.Exec(ctx, `DELETE FROM stored_responses WHERE id = ? AND entity = ?`, id, entity)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// DeleteOlder removes the responses stored before t, of every entity, and answers how many.
func (s *Store) DeleteOlder(ctx context.Context, t time.Time) (int, error) {
	res, err := s.db.Exec(ctx, `DELETE FROM stored_responses WHERE created_at < ?`, db.FormatTime(t))
	if err != nil {
		return 0, err
	}
	n, _ := res.RowsAffected()
	return int(n), nil
}
