package gemm

import (
	"sync"
	"testing"
	"time"
)

// feed records pairs of one shape: with prefetch taking on, without it off; every tenth
// pair's prefetching product is slowed 20× (a preemption), which the median ignores.
func feed(tn *PrefetchTuner, pairs int, on, off time.Duration) {
	for i := range pairs {
		d := on
		if i%10 == 3 {
			d *= 20
		}
		tn.record([3]int{1, 2, 3}, false, off)
		tn.record([3]int{1, 2, 3}, true, d)
	}
}

// TestPrefetchTunerDecides: a clear and steady median decides after one round; a round
// within the band is measured again, and after tuneRounds such rounds the prior stands;
// nothing before tunePairs pairs.
func TestPrefetchTunerDecides(t *testing.T) {
	t.Setenv("HONE_DECODE_PREFETCH", "")
	for _, c := range []struct {
		name    string
		prior   bool
		on, off time.Duration
		want    bool
		rounds  int
	}{
		{"prefetch faster", false, 90, 100, true, 1},
		{"prefetch slower", true, 110, 100, false, 1},
		{"tie keeps prior on", true, 101, 100, true, tuneRounds},
		{"tie keeps prior off", false, 97, 100, false, tuneRounds},
	} {
		tn := NewPrefetchTuner(c.name, c.prior)
		feed(tn, c.rounds*tunePairs-1, c.on*time.Microsecond, c.off*time.Microsecond)
		if pf, settled, _ := tn.Choice(); settled || pf != c.prior {
			t.Fatalf("%s: before %d pairs: pf %v settled %v, want the prior unsettled", c.name, c.rounds*tunePairs, pf, settled)
		}
		feed(tn, 1, c.on*time.Microsecond, c.off*time.Microsecond)
		pf, settled, ratio := tn.Choice()
		if !settled || pf != c.want {
			t.Fatalf("%s: pf %v settled %v (ratio %.3f), want %v", c.name, pf, settled, ratio, c.want)
		}
		if want := float64(c.on) / float64(c.off); ratio != want {
			t.Fatalf("%s: ratio %v, want the median %v", c.name, ratio, want)
		}
		if p := tn.Begin([3]int{1, 2, 3}, 1<<30); p.PF() != c.want || p.t != nil {
			t.Fatalf("%s: after deciding Begin gave pf %v timed %v", c.name, p.PF(), p.t != nil)
		}
	}
}

// TestPrefetchTunerUnsteady: a round whose halves disagree (prefetching 10% faster in the
// first half, while the machine was busy, and 10% slower in the second) is not clear: the
// next round decides, and a steady one overrides the prior.
func TestPrefetchTunerUnsteady(t *testing.T) {
	t.Setenv("HONE_DECODE_PREFETCH", "")
	tn := NewPrefetchTuner("unsteady", false)
	feed(tn, tunePairs/2, 90*time.Microsecond, 100*time.Microsecond)
	feed(tn, tunePairs/2, 110*time.Microsecond, 100*time.Microsecond)
	if _, settled, _ := tn.Choice(); settled {
		t.Fatal("settled by a round whose halves disagree")
	}
	feed(tn, tunePairs, 80*time.Microsecond, 100*time.Microsecond)
	if pf, settled, ratio := tn.Choice(); !settled || !pf || ratio != 0.8 {
		t.Fatalf("after a steady second round: pf %v settled %v ratio %v, want prefetching at 0.8", pf, settled, ratio)
	}
}

// TestPrefetchTunerAlternates: after the warm-up each shape alternates its modes; products of
// small weights take the prior untimed; pairs form only within a shape.
func TestPrefetchTunerAlternates(t *testing.T) {
	t.Setenv("HONE_DECODE_PREFETCH", "")
	tn := NewPrefetchTuner("test", true)
	for i := range tuneWarm {
		if p := tn.Begin([3]int{1, 1, 1}, tuneMinBytes); !p.PF() || p.t != nil {
			t.Fatalf("warm-up product %d: pf %v timed %v, want the prior untimed", i, p.PF(), p.t != nil)
		}
	}
	if p := tn.Begin([3]int{1, 1, 1}, tuneMinBytes-1); !p.PF() || p.t != nil {
		t.Fatal("a small product was timed or left the prior")
	}
	a0, b0 := tn.Begin([3]int{1, 1, 1}, tuneMinBytes), tn.Begin([3]int{2, 1, 1}, tuneMinBytes)
	a1, b1 := tn.Begin([3]int{1, 1, 1}, tuneMinBytes), tn.Begin([3]int{2, 1, 1}, tuneMinBytes)
	if a0.t == nil || a0.PF() == a1.PF() || b0.PF() == b1.PF() || a0.PF() != b0.PF() {
		t.Fatalf("modes: shape a %v %v, shape b %v %v; want each shape to alternate", a0.PF(), a1.PF(), b0.PF(), b1.PF())
	}
	a0.End()
	b1.End() // another shape, the other mode: no pair
	tn.mu.Lock()
	n := len(tn.ratios)
	tn.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d pairs from two shapes", n)
	}
	a1.End()
	tn.mu.Lock()
	n = len(tn.ratios)
	tn.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d pairs after a shape's two modes, want 1", n)
	}
}

// TestPrefetchTunerForced: HONE_DECODE_PREFETCH settles a tuner at once, untimed; a nil
// tuner never prefetches.
func TestPrefetchTunerForced(t *testing.T) {
	for _, c := range []struct {
		env  string
		want bool
	}{{"on", true}, {"off", false}} {
		t.Setenv("HONE_DECODE_PREFETCH", c.env)
		tn := NewPrefetchTuner("forced", !c.want)
		if pf, settled, _ := tn.Choice(); !settled || pf != c.want {
			t.Fatalf("HONE_DECODE_PREFETCH=%s: pf %v settled %v", c.env, pf, settled)
		}
		if p := tn.Begin([3]int{1, 1, 1}, 1<<30); p.PF() != c.want || p.t != nil {
			t.Fatalf("HONE_DECODE_PREFETCH=%s: Begin pf %v timed %v", c.env, p.PF(), p.t != nil)
		}
	}
	var tn *PrefetchTuner
	p := tn.Begin([3]int{1, 1, 1}, 1<<30)
	p.End()
	if p.PF() {
		t.Fatal("a nil tuner prefetches")
	}
}

// TestPrefetchTunerConcurrent: products from several goroutines at once settle the tuner
// (run with -race).
func TestPrefetchTunerConcurrent(t *testing.T) {
	t.Setenv("HONE_DECODE_PREFETCH", "")
	tn := NewPrefetchTuner("concurrent", false)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < tuneWarm+2*tunePairs; i++ {
				p := tn.Begin([3]int{g % 2, 1, 1}, tuneMinBytes)
				p.End()
				tn.Choice()
			}
		}()
	}
	wg.Wait()
	if _, settled, _ := tn.Choice(); !settled {
		t.Fatal("not settled")
	}
}

// TestLogAttrs: the start-up description names the implementation in use and how decode's
// prefetch is chosen, the variable's override included (as the tuners took it).
func TestLogAttrs(t *testing.T) {
	attrs := func() map[string]any {
		a := LogAttrs()
		m := map[string]any{}
		for i := 0; i+1 < len(a); i += 2 {
			m[a[i].(string)] = a[i+1]
		}
		return m
	}
	t.Setenv("HONE_DECODE_PREFETCH", "")
	m := attrs()
	t.Log(m)
	if m["kernels"] != Impl() || m["threads"] != Threads() || m["bf16_arithmetic_from_rows"] != BF16PairRows() {
		t.Fatalf("attrs %v", m)
	}
	if decodeTuners[0][kindF32] != nil {
		if m["decode_prefetch"] != "measured per kind on the first decode products" {
			t.Fatalf("decode_prefetch %v", m["decode_prefetch"])
		}
		// The tuners read the variable when they are made (at start-up): make one under it.
		t.Setenv("HONE_DECODE_PREFETCH", "off")
		defer func(old *PrefetchTuner) { decodeTuners[0][kindF32] = old }(decodeTuners[0][kindF32])
		decodeTuners[0][kindF32] = NewPrefetchTuner("f32", decodePrior)
		if m := attrs(); m["decode_prefetch"] != "forced off (HONE_DECODE_PREFETCH)" {
			t.Fatalf("with HONE_DECODE_PREFETCH=off: decode_prefetch %v", m["decode_prefetch"])
		}
	}
}

// TestTuning: a tuner is tuning from its first product of weights worth timing until it
// decides; Tuning reports any such tuner; forced tuners never tune.
func TestTuning(t *testing.T) {
	t.Setenv("HONE_DECODE_PREFETCH", "")
	tn := NewPrefetchTuner("tuning", false)
	if tn.tuning() {
		t.Fatal("tuning before any product")
	}
	tn.Begin([3]int{1, 2, 3}, 1).End() // small weights: untimed, unseen
	if tn.tuning() {
		t.Fatal("tuning after a product of small weights")
	}
	tn.Begin([3]int{1, 2, 3}, 1<<30).End()
	if !tn.tuning() || !Tuning() {
		t.Fatalf("after a product: tuning %v, Tuning() %v", tn.tuning(), Tuning())
	}
	feed(tn, tunePairs, 50*time.Microsecond, 100*time.Microsecond)
	if tn.tuning() {
		t.Fatal("tuning after deciding")
	}
	t.Setenv("HONE_DECODE_PREFETCH", "on")
	forced := NewPrefetchTuner("forced", false)
	forced.Begin([3]int{1, 2, 3}, 1<<30).End()
	if forced.tuning() {
		t.Fatal("a forced tuner tunes")
	}
}
