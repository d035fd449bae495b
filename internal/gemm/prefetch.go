package gemm

import (
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Decode's products read each weight from memory once, a few rows of activations against
// the whole matrix, so they run at the memory's read bandwidth at best. Two kernel sets do
// them: one leaves the weights to the hardware prefetcher, the other also prefetches every
// line of the weights 4 KiB ahead in software. Which reads faster depends on the CPU and its
// memory, not on the instruction set: on an Intel Xeon (Sapphire Rapids class) prefetching
// read the weights 1.1–1.3× faster, on an AMD EPYC (Zen 4) every distance measured slower
// (docs/performance.md, "Decode prefetch per CPU"). A benchmark at start-up would need a
// buffer larger than the last-level cache; instead a PrefetchTuner times the process's own
// first decode products, with the weights they really read, in both modes, and keeps the
// faster.

// Tuning parameters: the first tuneWarm products are not timed (the first pass over a
// model's weights can fault its pages in); a round of measurement takes tunePairs pairs of
// products of the same shape, one in each mode. The mode other than the prior (the rule
// measured per CPU vendor) is taken only when it wins clearly and steadily: the median ratio
// of the round's times, and the medians of its first and of its second half (a burst of
// other work on the machine lands in one half), must all lie beyond tuneBand of 1 on its
// side. A round that is not clear either way is measured again, up to tuneRounds rounds;
// then the prior stands. Products of weights below tuneMinBytes (which may sit in a cache)
// are neither timed nor counted.
//
// Before 2026-11-29 one round of 96 pairs decided with a band of 2%: on a 2-vCPU AMD EPYC a
// noisy first round could flip the choice of a process, and its batch-16 decode moved by
// 1.6× between two runs of one benchmark (issue 35).
const (
	tuneWarm     = 32
	tunePairs    = 96
	tuneRounds   = 3
	tuneBand     = 0.04
	tuneMinBytes = 256 << 10
)

// Tuner states.
const (
	tuneMeasuring uint32 = iota
	tuneOn
	tuneOff
)

// A PrefetchTuner chooses between the prefetching and the plain kernels of one kind of
// decode product (f32 weights, bf16 widened to f32, bf16 pairs, a quantized type) by timing
// them: Begin before each product, End after it. Until it has decided it alternates the two
// modes per weight shape and pairs the times of consecutive products of a shape; then every
// product takes the faster mode, at the cost of one atomic load. HONE_DECODE_PREFETCH=on or
// off decides at once, without measuring. Safe for concurrent use.
type PrefetchTuner struct {
	name   string
	prior  bool
	forced bool // by HONE_DECODE_PREFETCH
	state  atomic.Uint32
	// Measurement, under mu.
	mu     sync.Mutex
	seen   int
	shapes map[[3]int]*tuneShape
	ratios []float64 // time with prefetch ÷ time without, one per pair of this round
	rounds int       // rounds measured and found unclear
	ratio  float64   // the median of the round that decided (0 when forced)
}

// tuneShape is one weight shape's alternation and its pending unpaired time.
type tuneShape struct {
	next    bool // the mode of the shape's next timed product
	pending bool
	pf      bool
	d       time.Duration
}

// NewPrefetchTuner returns a tuner named name (in its log line) whose choice before it
// has measured, and when the other mode does not win clearly (tuneBand) and steadily, is
// prior.
func NewPrefetchTuner(name string, prior bool) *PrefetchTuner {
	t := &PrefetchTuner{name: name, prior: prior, shapes: map[[3]int]*tuneShape{}}
	tunersMu.Lock()
	tuners = append(tuners, t)
	tunersMu.Unlock()
	switch os.Getenv("HONE_DECODE_PREFETCH") {
	case "on":
		t.state.Store(tuneOn)
		t.forced = true
	case "off":
		t.state.Store(tuneOff)
		t.forced = true
	}
	return t
}

// tuners are every PrefetchTuner made, for Tuning.
var (
	tunersMu sync.Mutex
	tuners   []*PrefetchTuner
)

// Tuning reports whether a tuner has seen products and not yet decided: decode products are
// then still being timed in both modes. Benchmarks of steady decode run until it is false
// before they start their clocks (a process's first few hundred decode steps).
func Tuning() bool {
	tunersMu.Lock()
	defer tunersMu.Unlock()
	for _, t := range tuners {
		if t.tuning() {
			return true
		}
	}
	return false
}

// tuning reports whether t has seen products and not yet decided.
func (t *PrefetchTuner) tuning() bool {
	if t.state.Load() != tuneMeasuring {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.seen > 0
}

// Probe is one product's mode, and its start time when the tuner times it.
type Probe struct {
	t     *PrefetchTuner
	shape [3]int
	pf    bool
	start time.Time
}

// PF reports whether the product prefetches its weights.
func (p Probe) PF() bool { return p.pf }

// Begin returns the mode of a product by weights of the given shape (any three numbers
// that tell shapes apart) and size. A nil tuner never prefetches.
func (t *PrefetchTuner) Begin(shape [3]int, bytes int) Probe {
	if t == nil {
		return Probe{}
	}
	switch t.state.Load() {
	case tuneOn:
		return Probe{pf: true}
	case tuneOff:
		return Probe{}
	}
	if bytes < tuneMinBytes {
		return Probe{pf: t.prior}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state.Load() != tuneMeasuring {
		return Probe{pf: t.state.Load() == tuneOn}
	}
	if t.seen < tuneWarm {
		t.seen++
		return Probe{pf: t.prior}
	}
	s := t.shapes[shape]
	if s == nil {
		s = &tuneShape{}
		t.shapes[shape] = s
	}
	pf := s.next
	s.next = !s.next
	return Probe{t: t, shape: shape, pf: pf, start: time.Now()}
}

// End records the product's time, if Begin timed it.
func (p Probe) End() {
	if p.t != nil {
		p.t.record(p.shape, p.pf, time.Since(p.start))
	}
}

// record adds one timed product: with the shape's pending product of the other mode it
// makes a pair; with tunePairs pairs the tuner decides.
func (t *PrefetchTuner) record(shape [3]int, pf bool, d time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.state.Load() != tuneMeasuring {
		return
	}
	s := t.shapes[shape]
	if s == nil {
		s = &tuneShape{}
		t.shapes[shape] = s
	}
	if !s.pending || s.pf == pf {
		s.pending, s.pf, s.d = true, pf, d
		return
	}
	on, off := d, s.d
	if !pf {
		on, off = s.d, d
	}
	s.pending = false
	if off > 0 {
		t.ratios = append(t.ratios, float64(on)/float64(off))
	}
	if len(t.ratios) < tunePairs {
		return
	}
	n := len(t.ratios)
	all, first, second := median(t.ratios), median(t.ratios[:n/2]), median(t.ratios[n/2:])
	side := func(r float64) int {
		switch {
		case r < 1-tuneBand:
			return 1 // prefetching wins
		case r > 1+tuneBand:
			return -1
		}
		return 0
	}
	pfWins := t.prior
	clear := side(all) != 0 && side(first) == side(all) && side(second) == side(all)
	if clear {
		pfWins = side(all) > 0
	}
	t.rounds++
	if !clear && t.rounds < tuneRounds {
		// Not clear: measure another round (the shapes' alternation goes on).
		slog.Debug("decode prefetch unclear; measuring again", "weights", t.name, "round", t.rounds,
			"time_with_over_without", math.Round(all*1000)/1000, "halves", [2]float64{math.Round(first*1000) / 1000, math.Round(second*1000) / 1000})
		t.ratios = t.ratios[:0]
		return
	}
	t.ratio = all
	if pfWins {
		t.state.Store(tuneOn)
	} else {
		t.state.Store(tuneOff)
	}
	t.shapes, t.ratios = nil, nil
	slog.Info("decode prefetch measured", "weights", t.name, "prefetch", pfWins,
		"time_with_over_without", math.Round(all*1000)/1000,
		"halves", [2]float64{math.Round(first*1000) / 1000, math.Round(second*1000) / 1000},
		"clear", clear, "rounds", t.rounds, "pairs", n)
}

// median returns the median of r, sorting a copy.
func median(r []float64) float64 {
	s := slices.Sorted(slices.Values(r))
	n := len(s)
	return (s[(n-1)/2] + s[n/2]) / 2
}

// Choice reports the tuner's mode and whether it has settled (measured or forced); ratio is
// the median time with prefetch over time without that decided (0 when forced or not yet).
func (t *PrefetchTuner) Choice() (pf, settled bool, ratio float64) {
	switch t.state.Load() {
	case tuneOn:
		pf, settled = true, true
	case tuneOff:
		settled = true
	default:
		return t.prior, false, 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return pf, settled, t.ratio
}
