// Package db opens Hone's store: an embedded SQLite file (the default, through the pure-Go
// modernc.org/sqlite driver) or a PostgreSQL server (through pgx), and gives services one way
// to run queries, transactions and migrations on either.
//
// Services write their SQL once with `?` placeholders; Tx and DB rebind them to `$1..$n` on
// PostgreSQL. On SQLite the store keeps one writer: a pool with a single connection whose
// transactions start with BEGIN IMMEDIATE, beside a pool of query-only reader connections,
// with WAL journaling so readers never block the writer; a connection of its own copies the
// WAL into the main file after writes (the writer does so itself only past a backstop size).
// PostgreSQL uses one pool for both.
//
// Times are stored as TEXT in a fixed-width UTC format (FormatTime) on both dialects, so that
// they sort and compare as strings.
package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" database/sql driver
	_ "modernc.org/sqlite"             // registers the "sqlite" database/sql driver
)

// Dialect names the SQL dialect of a store.
type Dialect int

const (
	// SQLite is the embedded default.
	SQLite Dialect = iota + 1
	// Postgres is a PostgreSQL server.
	Postgres
)

func (d Dialect) String() string {
	switch d {
	case SQLite:
		return "sqlite"
	case Postgres:
		return "postgres"
	}
	return "unknown"
}

// DB is an open store.
type DB struct {
	dialect Dialect
	w       *sql.DB // the one writer (SQLite) or the pool (Postgres)
	r       *sql.DB // query-only readers (SQLite) or the pool (Postgres)
	where   string  // file path or host, for messages; never a password
	ckpt    *checkpointer
}

// BusyTimeout is how long an SQLite connection waits for a lock before failing.
const BusyTimeout = 10 * time.Second

// Open opens the store named by dsn: a `postgres://` or `postgresql://` URL opens PostgreSQL;
// anything else is an SQLite file path (optionally prefixed with `sqlite:`), created if missing.
func Open(ctx context.Context, dsn string) (*DB, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		return openPostgres(ctx, dsn)
	}
	return openSQLite(ctx, strings.TrimPrefix(dsn, "sqlite:"))
}

func sqliteDSN(path string, readOnly bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "foreign_keys(1)")
	// Reads come from memory-mapped pages and a larger page cache instead of a read(2)
	// per page, which dominated scans of large tables.
	q.Add("_pragma", "mmap_size(1073741824)")
	q.Add("_pragma", "cache_size(-32768)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Set("_txlock", "immediate")
		// A statement that writes many rows inside a transaction (a multi-row INSERT) keeps a
		// statement journal; in memory it costs no write(2) per page.
		q.Add("_pragma", "temp_store(MEMORY)")
		// WAL pages are copied into the main file by a checkpointer beside the writer
		// (checkpointer below); the writer checkpoints itself only when the WAL grew this far
		// (40 MB of 4 KiB pages) without one.
		q.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", backstopPages))
	}
	return "file:" + path + "?" + q.Encode()
}

// backstopPages is the WAL size, in pages, at which the SQLite writer checkpoints itself.
const backstopPages = 10000

// checkpointer copies the WAL into the main SQLite file on its own connection after writes,
// so that a commit does not wait for it (SQLite's automatic checkpoint runs inside the commit
// that crosses its threshold). It changes nothing of durability: a checkpoint only copies
// committed pages, and synchronous(NORMAL) in WAL mode makes every commit durable against a
// crash of the process either way.
type checkpointer struct {
	conn *sql.DB
	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

// ckptGap is the least time between two background checkpoints.
const ckptGap = 20 * time.Millisecond

func startCheckpointer(path string) (*checkpointer, error) {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(NORMAL)")
	conn, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	conn.SetMaxOpenConns(1)
	conn.SetMaxIdleConns(1)
	conn.SetConnMaxLifetime(0)
	if err := conn.Ping(); err != nil {
		conn.Close()
		return nil, err
	}
	c := &checkpointer{conn: conn, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c, nil
}

func (c *checkpointer) run() {
	defer close(c.done)
	for {
		select {
		case <-c.stop:
			return
		case <-c.kick:
		}
		// PASSIVE: copies what no reader still needs, never waits for the writer or readers.
		_, _ = c.conn.Exec("PRAGMA wal_checkpoint(PASSIVE)")
		select {
		case <-c.stop:
			return
		case <-time.After(ckptGap):
		}
	}
}

// written tells the checkpointer that a write committed.
func (c *checkpointer) written() {
	if c == nil {
		return
	}
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func (c *checkpointer) close() error {
	if c == nil {
		return nil
	}
	close(c.stop)
	<-c.done
	return c.conn.Close()
}

func openSQLite(ctx context.Context, path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("db: empty SQLite path")
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("db: create directory for %s: %w", path, err)
		}
	}
	w, err := sql.Open("sqlite", sqliteDSN(path, false))
	if err != nil {
		return nil, fmt.Errorf("db: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("db: open %s: %w", path, err)
	}
	// The first connection switched the file to WAL; readers can open now.
	r, err := sql.Open("sqlite", sqliteDSN(path, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("db: open %s: %w", path, err)
	}
	n := runtime.GOMAXPROCS(0) * 2
	if n < 4 {
		n = 4
	}
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("db: open %s: %w", path, err)
	}
	ck, err := startCheckpointer(path)
	if err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("db: open %s: %w", path, err)
	}
	return &DB{dialect: SQLite, w: w, r: r, where: path, ckpt: ck}, nil
}

func openPostgres(ctx context.Context, dsn string) (*DB, error) {
	where := "postgres"
	if u, err := url.Parse(dsn); err == nil {
		where = "postgres://" + u.Host + u.Path
	}
	p, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, fmt.Errorf("db: open %s: %w", where, err)
	}
	p.SetMaxOpenConns(runtime.GOMAXPROCS(0)*4 + 4)
	if err := p.PingContext(ctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("db: open %s: %w", where, err)
	}
	return &DB{dialect: Postgres, w: p, r: p, where: where}, nil
}

// Dialect tells which SQL dialect the store speaks.
func (d *DB) Dialect() Dialect { return d.dialect }

// String names the store without secrets.
func (d *DB) String() string { return d.dialect.String() + ":" + d.where }

// Writer is the connection pool that writes (on SQLite: one connection).
func (d *DB) Writer() *sql.DB { return d.w }

// Reader is the pool for queries (on SQLite: query-only connections).
func (d *DB) Reader() *sql.DB { return d.r }

// Ping checks that both pools answer.
func (d *DB) Ping(ctx context.Context) error {
	if err := d.w.PingContext(ctx); err != nil {
		return err
	}
	var one int
	return d.r.QueryRowContext(ctx, "SELECT 1").Scan(&one)
}

// Close closes the store. On SQLite it checkpoints the WAL into the main file first.
func (d *DB) Close() error {
	var errs []error
	if d.dialect == SQLite {
		errs = append(errs, d.ckpt.close())
		_, _ = d.w.Exec("PRAGMA wal_checkpoint(TRUNCATE)")
		errs = append(errs, d.r.Close())
	}
	errs = append(errs, d.w.Close())
	return errors.Join(errs...)
}

// Rebind rewrites `?` placeholders to `$1..$n` on PostgreSQL; on SQLite it returns q unchanged.
// Question marks inside single-quoted literals, double-quoted identifiers and comments are kept.
func (d *DB) Rebind(q string) string {
	if d.dialect != Postgres {
		return q
	}
	return rebindDollar(q)
}

func rebindDollar(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 8)
	n := 0
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(q) {
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c { // doubled quote escapes itself
						j += 2
						continue
					}
					break
				}
				j++
			}
			if j >= len(q) {
				j = len(q) - 1
			}
			b.WriteString(q[i : j+1])
			i = j
		case c == '-' && i+1 < len(q) && q[i+1] == '-':
			j := strings.IndexByte(q[i:], '\n')
			if j < 0 {
				j = len(q) - i - 1
			}
			b.WriteString(q[i : i+j+1])
			i += j
		case c == '?':
			n++
			fmt.Fprintf(&b, "$%d", n)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// Exec runs a statement outside an explicit transaction on the writer.
func (d *DB) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	res, err := d.w.ExecContext(ctx, d.Rebind(q), args...)
	if err == nil {
		d.ckpt.written()
	}
	countErr(err)
	return res, err
}

// Query runs a query on the readers.
func (d *DB) Query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	rows, err := d.r.QueryContext(ctx, d.Rebind(q), args...)
	countErr(err)
	return rows, err
}

// QueryRow runs a one-row query on the readers.
func (d *DB) QueryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return d.r.QueryRowContext(ctx, d.Rebind(q), args...)
}

// Tx is a transaction whose methods rebind placeholders for the store's dialect.
type Tx struct {
	tx *sql.Tx
	d  *DB
}

// Dialect tells which SQL dialect the transaction speaks.
func (t *Tx) Dialect() Dialect { return t.d.dialect }

// Exec runs a statement in the transaction.
func (t *Tx) Exec(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.tx.ExecContext(ctx, t.d.Rebind(q), args...)
}

// Query runs a query in the transaction.
func (t *Tx) Query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.tx.QueryContext(ctx, t.d.Rebind(q), args...)
}

// QueryRow runs a one-row query in the transaction.
func (t *Tx) QueryRow(ctx context.Context, q string, args ...any) *sql.Row {
	return t.tx.QueryRowContext(ctx, t.d.Rebind(q), args...)
}

// Prepare prepares a statement in the transaction (for many executions of one insert).
func (t *Tx) Prepare(ctx context.Context, q string) (*sql.Stmt, error) {
	return t.tx.PrepareContext(ctx, t.d.Rebind(q))
}

// SQL is the underlying transaction.
func (t *Tx) SQL() *sql.Tx { return t.tx }

// WriteTx runs fn in a write transaction: committed when fn returns nil, rolled back otherwise
// (nothing half written). On SQLite it is BEGIN IMMEDIATE on the one writer connection.
func (d *DB) WriteTx(ctx context.Context, fn func(tx *Tx) error) error {
	err := d.runTx(ctx, d.w, nil, fn)
	if err == nil {
		d.ckpt.written()
	}
	return err
}

// ReadTx runs fn in a read-only transaction: one consistent snapshot for several queries.
func (d *DB) ReadTx(ctx context.Context, fn func(tx *Tx) error) error {
	opts := &sql.TxOptions{ReadOnly: true}
	if d.dialect == SQLite {
		opts = nil // the reader connections are query_only; modernc rejects ReadOnly options
	}
	return d.runTx(ctx, d.r, opts, fn)
}

func (d *DB) runTx(ctx context.Context, pool *sql.DB, opts *sql.TxOptions, fn func(tx *Tx) error) (err error) {
	stx, err := pool.BeginTx(ctx, opts)
	if err != nil {
		countErr(err)
		return fmt.Errorf("db: begin: %w", err)
	}
	tx := &Tx{tx: stx, d: d}
	defer func() {
		if p := recover(); p != nil {
			_ = stx.Rollback()
			panic(p)
		}
	}()
	if err := fn(tx); err != nil {
		_ = stx.Rollback()
		if IsUnavailable(err) {
			countErr(err) // the connection went away mid-transaction; the service's own errors are not the store's
		}
		return err
	}
	if err := stx.Commit(); err != nil {
		countErr(err)
		return fmt.Errorf("db: commit: %w", err)
	}
	return nil
}

// TimeLayout is the fixed-width UTC layout times are stored in; strings in it sort by time.
const TimeLayout = "2006-01-02T15:04:05.000000Z"

// FormatTime formats t for storage.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ParseTime parses a stored time.
func ParseTime(s string) (time.Time, error) {
	t, err := time.Parse(TimeLayout, s)
	if err != nil {
		return time.Parse(time.RFC3339Nano, s)
	}
	return t, nil
}

// IsUniqueViolation reports whether err is a unique or primary-key constraint failure.
func IsUniqueViolation(err error) bool {
	if err == nil {
		return false
	}
	s := err.Error()
	return strings.Contains(s, "UNIQUE constraint failed") || // SQLite
		strings.Contains(s, "SQLSTATE 23505") // PostgreSQL unique_violation
}
