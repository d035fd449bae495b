package gemm

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"
)

// TestReadSum: the vector read kernel sums as a plain loop does (small integers: exact).
func TestReadSum(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, n := range []int{0, 1, 7, 63, 64, 65, 200, 1000} {
		p := make([]float32, n)
		var want float32
		for i := range p {
			p[i] = float32(rng.IntN(9) - 4)
			want += p[i]
		}
		if got := ReadSum(p); got != want {
			t.Fatalf("n %d: ReadSum = %v, want %v", n, got, want)
		}
	}
}

// BenchmarkMemoryBandwidth is a STREAM-like read benchmark: threads goroutines (1, and
// GOMAXPROCS) each sum their share of a 512 MiB buffer (far beyond any cache) with ReadSum, so
// every byte comes from DRAM once per pass; GB/s is what decode at batch 1 can reach at best
// when it streams the weights (docs/performance.md "Decode bandwidth").
func BenchmarkMemoryBandwidth(b *testing.B) {
	const size = 512 << 20
	buf := make([]float32, size/4)
	for i := range buf {
		buf[i] = 1
	}
	for _, threads := range []int{1, runtime.GOMAXPROCS(0)} {
		b.Run(fmt.Sprintf("threads%d", threads), func(b *testing.B) {
			start := time.Now()
			for it := 0; it < b.N; it++ {
				var wg sync.WaitGroup
				for t := 0; t < threads; t++ {
					part := buf[len(buf)*t/threads : len(buf)*(t+1)/threads]
					wg.Add(1)
					go func() {
						defer wg.Done()
						if ReadSum(part) != float32(len(part)) && len(part) < 1<<24 {
							panic("ReadSum")
						}
					}()
				}
				wg.Wait()
			}
			b.ReportMetric(float64(size)*float64(b.N)/time.Since(start).Seconds()/1e9, "GB/s")
		})
	}
}
