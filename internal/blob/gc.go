package blob

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/honeai/hone/internal/db"
)

// GC deletes the stored blobs that no reference names and that were last stored more than
// grace ago, and returns how many went and their bytes. refs are SQL queries each answering
// one column of referenced hashes (the blob users' tables: checkpoint files, base model
// files); the names given by Name are references too. The grace period keeps the blobs a
// writer has stored but not yet referenced (a checkpoint whose row is not committed yet);
// a writer that finds a blob stored already touches it (DB.Touch), so a blob being reused is
// never deleted under it: PostgreSQL re-checks the deletion's condition on a row updated
// meanwhile.
func (b *DB) GC(ctx context.Context, grace time.Duration, refs ...string) (n int, bytes int64, err error) {
	all := append([]string{`SELECT hash FROM blob_names`}, refs...)
	for _, r := range all {
		if strings.Contains(r, ";") {
			return 0, 0, fmt.Errorf("blob: gc: a reference query holds ';'")
		}
	}
	cutoff := db.FormatTime(timeNow().Add(-grace))
	err = b.d.WriteTx(ctx, func(tx *db.Tx) error {
		rows, err := tx.Query(ctx, `DELETE FROM blobs WHERE created_at < ? AND hash NOT IN (`+strings.Join(all, " UNION ")+`) RETURNING size`, cutoff)
		if err != nil {
			return err
		}
		for rows.Next() {
			var size int64
			if err := rows.Scan(&size); err != nil {
				rows.Close()
				return err
			}
			n++
			bytes += size
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		// Chunks whose blob is gone; chunks of a Put in progress are under a temporary name
		// in an uncommitted transaction, invisible here.
		_, err = tx.Exec(ctx, `DELETE FROM blob_chunks WHERE hash NOT LIKE 'tmp-%' AND hash NOT IN (SELECT hash FROM blobs)`)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("blob: gc: %w", err)
	}
	return n, bytes, nil
}
