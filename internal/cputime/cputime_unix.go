//go:build unix

// Package cputime reports the CPU time the process has used, for benchmarks that report CPU
// seconds beside wall-clock time (on a shared machine the first moves far less).
package cputime

import (
	"syscall"
	"time"
)

// Seconds returns the process's user and system CPU time so far, all threads.
func Seconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
