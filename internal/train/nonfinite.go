package train

import (
	"errors"
	"fmt"
	"math"

	"github.com/honeai/hone/internal/model"
)

// ErrDiverged is wrapped by the errors of a step whose loss, gradients or updated adapter
// are not finite: training diverged (a learning rate too large, usually), and nothing of
// it may be saved.
var ErrDiverged = errors.New("training diverged")

func isFinite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// checkGradStep refuses a step whose loss or gradient norm is not finite, before the
// optimizer applies it.
func checkGradStep(loss, gradNorm float64) error {
	if !isFinite(loss) {
		return fmt.Errorf("%w: the loss is %v", ErrDiverged, loss)
	}
	if !isFinite(gradNorm) {
		return fmt.Errorf("%w: the gradient norm is %v", ErrDiverged, gradNorm)
	}
	return nil
}

// CheckFinite reports an adapter with non-finite values (how many), which must be neither
// saved nor served.
func CheckFinite(a *model.LoRA) error {
	bad, total := 0, 0
	for _, p := range append(params(a), tokenParams(a)...) {
		total += len(p)
		for _, v := range p {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				bad++
			}
		}
	}
	if bad > 0 {
		return fmt.Errorf("%w: %d of %d adapter values are not finite", ErrDiverged, bad, total)
	}
	return nil
}
