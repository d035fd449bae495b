package trace

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/db/dbtest"
)

// checkGoSortVal compares goSortVal with SQLite's json_extract (the real engine) on doc at
// field: where goSortVal answers, it must give what json_extract's value gives.
func checkGoSortVal(t *testing.T, d *db.DB, doc, field string) bool {
	t.Helper()
	segs := strings.Split(field, ".")
	index := make([]bool, len(segs))
	for i, s := range segs {
		index[i] = isDigits(s)
	}
	got, ok := goSortVal([]byte(doc), segs, index)
	if !ok {
		return false
	}
	var native any
	if err := d.QueryRow(context.Background(), `SELECT json_extract(?, ?)`, doc, JSONPathArg(db.SQLite, segs)).Scan(&native); err != nil {
		t.Fatalf("%s at %s: %v", doc, field, err)
	}
	if want := nativeSortVal(native); got != want {
		t.Fatalf("%s at %s: Go %+v, json_extract %+v (%T %v)", doc, field, got, want, native, native)
	}
	return true
}

func TestGoSortValMatchesJSONExtract(t *testing.T) {
	d := dbtest.SQLite(t)
	numbers := []string{"0", "-0", "7", "-12", "1.0", "-0.5", "1e2", "1E+2", "2e-3", "-1.5e-3", "0.1", "0.30000000000000004",
		"3.14159265358979", "123456789012345678", "-123456789012345678", "1234567890123456789", "1e22", "1e-22", "1e23",
		"1.7976931348623157e308", "5e-324", "0.000001", "100.000", "9007199254740993", "0.1e1", "00.1e-0"}
	for _, v := range append(numbers, `"text"`, `"é ✓"`, `"a\nb"`, `"\u00e9"`, `""`, "true", "false", "null", "[]", "[1,2]", `{"a":1}`, "NaN", "Infinity", "-Infinity") {
		if strings.HasPrefix(v, "00") {
			continue // not JSON
		}
		checkGoSortVal(t, d, `{"input": {"score": `+v+`, "other": 1}}`, "input.score")
		checkGoSortVal(t, d, `[`+v+`]`, "0")
	}
	for _, c := range []struct{ doc, field string }{
		{`{"a":1,"a":2}`, "a"}, // the first of two members named alike
		{`{"a":[{"b":"x"},{"b":"y"}]}`, "a.1.b"},
		{`{"a":{"0":5}}`, "a.0"}, // a digit step is an index: not a member
		{`{"a":[5]}`, "a.x"},
		{`{"a":5}`, "a.b"},
		{`{"b":1}`, "a"},
		{`{"a\u0062":1,"ab":2}`, "ab"},
		{`{"": {"": 3}}`, "x"},
	} {
		checkGoSortVal(t, d, c.doc, c.field)
	}
	// Random documents: numbers, strings, booleans, nulls, nesting.
	rng := rand.New(rand.NewPCG(3, 3))
	var val func(depth int) string
	val = func(depth int) string {
		switch r := rng.IntN(9); {
		case r == 0 && depth > 0:
			return fmt.Sprintf(`{"a": %s, "b": %s}`, val(depth-1), val(depth-1))
		case r == 1 && depth > 0:
			return fmt.Sprintf(`[%s, %s]`, val(depth-1), val(depth-1))
		case r == 2:
			return fmt.Sprintf("%d", rng.Int64N(1<<62)-(1<<61))
		case r == 3:
			return fmt.Sprintf("%.*g", 1+rng.IntN(17), (rng.Float64()-0.5)*float64(int64(1)<<rng.IntN(60)))
		case r == 4:
			return fmt.Sprintf("%de%d", rng.IntN(100000), rng.IntN(50)-25)
		case r == 5:
			return fmt.Sprintf(`"s%d"`, rng.IntN(100))
		case r == 6:
			return []string{"true", "false", "null"}[rng.IntN(3)]
		}
		return fmt.Sprintf("%d.%d", rng.IntN(1000), rng.IntN(1000))
	}
	answered := 0
	for range 3000 {
		doc := val(3)
		for _, field := range []string{"a", "b", "0", "1", "a.a", "a.0", "0.b", "1.1", "b.1.a"} {
			if checkGoSortVal(t, d, doc, field) {
				answered++
			}
		}
	}
	if answered < 10000 {
		t.Fatalf("goSortVal answered only %d of 27,000 lookups", answered)
	}
}

func FuzzGoSortVal(f *testing.F) {
	d := dbtest.SQLite(f)
	f.Add(`{"input": {"score": 12}}`, "input.score")
	f.Add(`[1.5e3, "x", true]`, "0")
	f.Add(`{"a": [null, -0.25]}`, "a.1")
	f.Fuzz(func(t *testing.T, doc, field string) {
		// A backslash in a field is a bad JSON path to SQLite: such sorts keep json_extract.
		if checkFieldPath(field) != nil || strings.Contains(field, `\`) || !jsonValid(t, d, doc) {
			return
		}
		checkGoSortVal(t, d, doc, field)
	})
}

// jsonValid reports whether SQLite reads doc as JSON at all (json_extract errors otherwise).
func jsonValid(t *testing.T, d *db.DB, doc string) bool {
	var ok int
	if err := d.QueryRow(context.Background(), `SELECT json_valid(?)`, doc).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok == 1
}
