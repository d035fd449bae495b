package trace

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
)

// sortPositions (first key inline, halves sorted on two cores and merged) orders positions
// as one plain sort by all keys, ties by position, does.
func TestSortPositionsMatchesPlainSort(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	numbersOnly := false
	randVal := func() sortVal {
		if numbersOnly && rng.IntN(5) > 0 {
			return sortVal{kind: 1, num: float64(rng.IntN(100))}
		}
		if numbersOnly {
			return sortVal{kind: 3}
		}
		switch rng.IntN(4) {
		case 0:
			return sortVal{kind: 3}
		case 1:
			return sortVal{kind: 2, text: strconv.Itoa(rng.IntN(50))}
		default:
			return sortVal{kind: 1, num: float64(rng.IntN(100))}
		}
	}
	for _, numbers := range []bool{false, true} { // numbers only: sortNumbers's case
		numbersOnly = numbers
		for _, n := range []int{0, 1, 100, 4096, 10001} {
			for _, nk := range []int{1, 2} {
				for _, d0 := range []bool{false, true} {
					keys := make([]sortVal, n*nk)
					for i := range keys {
						keys[i] = randVal()
					}
					desc := []bool{d0, !d0}[:nk]
					want := make([]int32, n)
					for i := range want {
						want[i] = int32(i)
					}
					slices.SortFunc(want, func(a, b int32) int {
						for k := 0; k < nk; k++ {
							if c := compareSortVals(keys[int(a)*nk+k], keys[int(b)*nk+k], desc[k]); c != 0 {
								return c
							}
						}
						return int(a) - int(b)
					})
					if got := sortPositions(keys, nk, desc); !slices.Equal(got, want) {
						t.Fatalf("numbers only %v, n=%d nk=%d desc=%v: order differs", numbers, n, nk, desc)
					}
				}
			}
		}
	}
}
