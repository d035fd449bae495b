package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// smolLogLikelihoods are transformers' log-likelihoods of the lm-eval scenario's choices on the
// real SmolLM2-135M-Instruct directory (scripts/model-goldens/smollm2_loglikelihood.py).
var smolLogLikelihoods = [][]float64{{-4.50934, -7.39197, -10.77433}, {-8.81961, -4.97764, -11.04888}, {-6.56102, -6.92997, -5.43296}, {-6.31187, -10.05639, -12.75323}}

// TestConformanceLMEval runs lm-evaluation-harness (conformance/lmeval-py/scenario.py) on a
// server as its users run it against vLLM: local-completions on /v1/completions with the
// remote tokenizer, on a multiple-choice task of four questions. On the demo model the run
// completes with a log-likelihood per choice; on the real SmolLM2 (HONE_SMOLLM2_DIR) every
// log-likelihood equals transformers' within 2e-3 and each question is answered right.
func TestConformanceLMEval(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "conformance", "lmeval-py")
	py := venvPython(t, "", "lmeval-py", "import lm_eval")
	if py == "" {
		skipOrFail(t, "lm-evaluation-harness is not installed in %s/.venv (run scripts/test-setup.sh)", dir)
	}
	run := func(t *testing.T, model string, args ...string) ([][]float64, float64) {
		data := t.TempDir()
		s := startServer(t, data, args...)
		key := initialKey(t, data)
		line := runScenario(t, 5*time.Minute, []string{"HONE_URL=" + s.url, "HONE_KEY=" + key, "HONE_MODEL=" + model, "HOME=" + t.TempDir()}, py, filepath.Join(dir, "scenario.py"))
		var res struct {
			OK  bool        `json:"ok"`
			Acc float64     `json:"acc"`
			LLs [][]float64 `json:"loglikelihoods"`
		}
		if err := json.Unmarshal(line, &res); err != nil || !res.OK || len(res.LLs) != 4 {
			t.Fatalf("scenario printed %s (err %v)", line, err)
		}
		return res.LLs, res.Acc
	}
	t.Run("demo", func(t *testing.T) { run(t, "demo") })
	t.Run("smollm2", func(t *testing.T) {
		smol := os.Getenv("HONE_SMOLLM2_DIR")
		if smol == "" {
			skipOrFail(t, "HONE_SMOLLM2_DIR is not set (scripts/test-setup.sh writes a real SmolLM2-135M-Instruct directory)")
		}
		lls, acc := run(t, "smol", "--model", "smol="+smol, "--no-demo-model")
		for i, row := range smolLogLikelihoods {
			for j, want := range row {
				if math.Abs(lls[i][j]-want) > 2e-3 {
					t.Errorf("question %d choice %d: log-likelihood %.5f, transformers %.5f", i, j, lls[i][j], want)
				}
			}
		}
		if acc != 1 {
			t.Errorf("accuracy %v, want 1", acc)
		}
		t.Logf("lm-eval on SmolLM2-135M-Instruct through Hone: acc %v, log-likelihoods %v", acc, lls)
	})
}
