package main

import (
	"context"
	"path/filepath"
	"time"

	"github.com/honeai/hone/internal/blob"
)

// sweepTemps removes, at start and every hour until ctx ends, the temporary files that
// writes which never finished left in the data directory (a process killed during an upload
// or while storing a blob): under DIR/files and DIR/cache/blobs, those not modified for
// staleTemp (far longer than --read-timeout lets an upload take). With the transactions that
// record an upload together with its bytes, nothing else of a failed upload is kept.
func (s *system) sweepTemps(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		for _, root := range []string{filepath.Join(s.cfg.DataDir, "files"), filepath.Join(s.cfg.DataDir, "cache", "blobs")} {
			if n, size, err := blob.SweepTemp(root, staleTemp); err != nil && ctx.Err() == nil {
				s.log.Warn("temporary files of interrupted writes not removed", "dir", root, "err", err)
			} else if n > 0 {
				s.log.Info("removed temporary files of interrupted writes", "dir", root, "files", n, "bytes", size)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
