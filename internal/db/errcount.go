package db

import (
	"context"
	"errors"
	"sync/atomic"
)

// storeErrors count the store's failures this process saw (metrics): statements outside a
// transaction, transactions that could not begin or commit, and connections lost inside one;
// a cancelled request's errors are not the store's.
var storeErrors struct{ unavailable, other atomic.Int64 }

func countErr(err error) {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return
	}
	if IsUnavailable(err) {
		storeErrors.unavailable.Add(1)
	} else {
		storeErrors.other.Add(1)
	}
}

// Errors are the store's failures this process saw: unavailable (the store could not be
// reached: IsUnavailable) and other (a statement, begin or commit that failed otherwise).
func Errors() (unavailable, other int64) {
	return storeErrors.unavailable.Load(), storeErrors.other.Load()
}
