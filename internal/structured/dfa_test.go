package structured

import (
	"math/rand/v2"
	"regexp"
	"testing"
)

// TestDFAMatchesRegexp: the automaton accepts exactly what Go's regexp fully matches, on
// random strings over an alphabet that includes multi-byte characters.
func TestDFAMatchesRegexp(t *testing.T) {
	exprs := []string{`[a-c]+`, `(ab|a)*c?`, `\d{2,4}-x`, `"[^"\\]*"`, `é+ö?`, `(true|false|null)`, `-?(0|[1-9][0-9]*)(\.[0-9]+)?`, `.{0,3}`, `[^a]*`, `^abc$`, `\s*\{\s*\}`, `日本?語`}
	alphabet := []string{"a", "b", "c", "1", "2", "-", "x", `"`, `\`, "é", "ö", ".", "0", "9", " ", "{", "}", "日", "本", "語", "t", "r", "u", "e", "\n"}
	rng := rand.New(rand.NewPCG(1, 2))
	for _, e := range exprs {
		d, err := CompileRegex(e)
		if err != nil {
			t.Fatalf("%s: %v", e, err)
		}
		re := regexp.MustCompile(`^(?:` + e + `)$`)
		for i := 0; i < 3000; i++ {
			n := rng.IntN(8)
			s := ""
			for k := 0; k < n; k++ {
				s += alphabet[rng.IntN(len(alphabet))]
			}
			if got, want := d.MatchString(s), re.MatchString(s); got != want {
				t.Fatalf("%s on %q: dfa %v, regexp %v", e, s, got, want)
			}
		}
	}
	if _, err := CompileRegex(`\bx`); err == nil {
		t.Fatal("word boundary accepted")
	}
	// Invalid UTF-8 never matches, even for "any byte" classes.
	d, _ := CompileRegex(`.*`)
	if d.MatchString("\xff") || d.MatchString("\xe0\x80\x80") || !d.MatchString("é") {
		t.Fatal("UTF-8 handling")
	}
}
