package gemm

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
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
// deadlock on each other's tasks, and a worker that starts late simply finds less to do.
type job struct {
	n        int32
	next     atomic.Int32
	done     atomic.Int32
	sleeping atomic.Bool   // the caller gave up spinning and waits on wake
	wake     chan struct{} // buffered(1): the last task's finisher signals a sleeping caller
	fn       func(task int)
}

func (j *job) work() {
	for {
		t := j.next.Add(1) - 1
		if t >= j.n {
			return
		}
		j.fn(int(t))
		if j.done.Add(1) == j.n && j.sleeping.Load() {
			select {
			case j.wake <- struct{}{}:
			default:
			}
		}
	}
}

// waitSpin is how long the caller spins for the tasks that other goroutines are running
// before it parks. Parking and being woken costs tens of microseconds, as much as a
// decode-sized task; spinning longer wastes the core when the machine is oversubscribed
// (the worker's thread may be descheduled for a whole time slice).
const waitSpin = 50 * time.Microsecond

// wait returns when every task is done. The remaining tasks are already running on other
// goroutines (at most one task each).
func (j *job) wait() {
	var start time.Time
	for i := 1; j.done.Load() < j.n; i++ {
		if i%256 != 0 {
			continue
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) > waitSpin {
			j.sleeping.Store(true)
			if j.done.Load() < j.n {
				<-j.wake
			}
			return
		}
		runtime.Gosched()
	}
}

// spinFor is how long an idle worker keeps polling for the next job before it parks.
// Waking a parked goroutine costs tens of microseconds, as much as a whole decode-sized
// product, so workers stay hot between the back-to-back calls of a forward pass.
const spinFor = 200 * time.Microsecond

// pool holds long-lived worker goroutines fed through a channel.
var pool struct {
	mu      sync.Mutex
	workers int
	jobs    chan *job
	queued  atomic.Int32 // jobs sent and not yet received
}

func ensureWorkers(n int) chan *job {
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.jobs == nil {
		pool.jobs = make(chan *job, 64)
	}
	for pool.workers < n {
		pool.workers++
		go worker(pool.jobs)
	}
	return pool.jobs
}

func worker(ch chan *job) {
	for {
		j := poll(ch)
		if j == nil {
			j = <-ch // park
			pool.queued.Add(-1)
		}
		j.work()
	}
}

// poll spins for up to spinFor waiting for a job, yielding the processor regularly so
// that other goroutines are not starved; it returns nil if none came.
func poll(ch chan *job) *job {
	var start time.Time
	for i := 0; ; i++ {
		if pool.queued.Load() > 0 {
			select {
			case j := <-ch:
				pool.queued.Add(-1)
				return j
			default:
			}
		}
		if i&255 == 255 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > spinFor {
				return nil
			}
			runtime.Gosched()
		}
	}
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
	j := &job{n: int32(tasks), fn: fn, wake: make(chan struct{}, 1)}
	helpers := min(workers, tasks) - 1
	ch := ensureWorkers(helpers)
	for i := 0; i < helpers; i++ {
		pool.queued.Add(1)
		select {
		case ch <- j:
		default: // the queue is full: the caller does the rest
			pool.queued.Add(-1)
		}
	}
	j.work()
	j.wait()
}

// Parallel runs fn(0..tasks-1) on the worker pool with up to Threads() goroutines (the caller
// included) and returns when all are done: for packages whose products are not GEMMs (the
// quantized matrices of internal/quant) to share gemm's workers instead of starting their own.
func Parallel(tasks int, fn func(task int)) { parallel(tasks, Threads(), fn) }

// ParallelRows is Parallel over rows [0, rows) in ranges of chunk rows: fn(r0, r1) for each.
func ParallelRows(rows, chunk int, fn func(r0, r1 int)) {
	Parallel((rows+chunk-1)/chunk, func(t int) { fn(t*chunk, min((t+1)*chunk, rows)) })
}
