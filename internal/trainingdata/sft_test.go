package trainingdata

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/synth"
)

func tinyDir(t testing.TB, arch string, std float64) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), arch)
	o := synth.Tiny(arch)
	o.Std = std
	if err := synth.Write(dir, o); err != nil {
		t.Fatal(err)
	}
	return dir
}

const capitals = `{"messages":[{"role":"user","content":"Capital of France?"},{"role":"assistant","content":"Paris."}]}
{"messages":[{"role":"user","content":"Capital of Japan?"},{"role":"assistant","content":"Tokyo."}]}
{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Capital of Peru?"},{"role":"assistant","content":"Lima."},{"role":"user","content":"And Chile?"},{"role":"assistant","content":"Santiago."}]}
{"messages":[{"role":"user","content":"Capital of Kenya?"},{"role":"assistant","content":"Nairobi."}]}
`

func TestTokenizeMarksAssistantTurns(t *testing.T) {
	dir := tinyDir(t, "llama", 0.02)
	c, err := LoadChat(dir)
	if err != nil {
		t.Fatal(err)
	}
	xs, err := ReadSFT(strings.NewReader(capitals), c, "all")
	if err != nil {
		t.Fatal(err)
	}
	learned := func(x Example) string {
		var ids []int
		for i, id := range x.Tokens {
			if x.Train[i] {
				ids = append(ids, id)
			}
		}
		return c.Tok.Decode(ids, false)
	}
	if got := learned(xs[0]); !strings.Contains(got, "Paris.") || strings.Contains(got, "France") {
		t.Fatalf("learned text %q", got)
	}
	if got := learned(xs[2]); !strings.Contains(got, "Lima.") || !strings.Contains(got, "Santiago.") || strings.Contains(got, "Chile") {
		t.Fatalf("all turns: %q", got)
	}
	last, _ := ReadSFT(strings.NewReader(capitals), c, "last")
	if got := learned(last[2]); strings.Contains(got, "Lima") || !strings.Contains(got, "Santiago.") {
		t.Fatalf("last turn: %q", got)
	}
	// Bad lines are named.
	for _, bad := range []string{"{\"messages\": 3}\n", "not json\n", "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}\n"} {
		if _, err := ReadSFT(strings.NewReader(capitals+bad), c, "all"); err == nil || !strings.Contains(err.Error(), "line 5") {
			t.Errorf("%q: err = %v", bad, err)
		}
	}
}
