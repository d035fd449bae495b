package gemm

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// threads is the configured worker count; 0 means runtime.GOMAXPROCS(0).
var threads atomic.Int64

// SetThreads sets the number of goroutines one call may use (the caller included).
// n <= 0 restores the default, runtime.GOMAXPROCS(0).
func SetThreads(n int) {
	if n < 0 {
		n = 0
	}
	threads.Store(int64(n))
}

// Threads returns the number of goroutines one call may use.
func Threads() int {
	if n := int(threads.Load()); n > 0 {
		return n
	}
	return runtime.GOMAXPROCS(0)
}

// job is a set of independent tasks 0..n-1. The calling goroutine and any idle pool workers
// claim task indices until none is left; only the caller waits, so concurrent calls never
// deadlock on each other's tasks.
type job struct {
	n    int32
	next atomic.Int32
	wg   sync.WaitGroup
	fn   func(task int)
}

func (j *job) work() {
	for {
		t := j.next.Add(1) - 1
		if t >= j.n {
			return
		}
		j.fn(int(t))
		j.wg.Done()
	}
}

// pool holds long-lived worker goroutines fed through a channel.
var pool struct {
	mu      sync.Mutex
	workers int
	jobs    chan *job
}

func ensureWorkers(n int) chan *job {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.jobs == nil {
		pool.jobs = make(chan *job, 64)
	}
	for pool.workers < n {
		pool.workers++
		go func(ch chan *job) {
			for j := range ch {
				j.work()
			}
		}(pool.jobs)
	}
	return pool.jobs
}

// parallel runs fn(0..tasks-1) using up to workers goroutines including the caller and
// returns when all tasks are done.
func parallel(tasks, workers int, fn func(task int)) {
	if tasks <= 0 {
		return
	}
	if tasks == 1 || workers <= 1 {
		for t := 0; t < tasks; t++ {
			fn(t)
		}
		return
	}
	j := &job{n: int32(tasks), fn: fn}
	j.wg.Add(tasks)
	helpers := min(workers, tasks) - 1
	ch := ensureWorkers(helpers)
	for i := 0; i < helpers; i++ {
		select {
		case ch <- j:
		default: // every worker is busy and the queue is full: the caller does the rest
		}
	}
	j.work()
	j.wg.Wait()
}
