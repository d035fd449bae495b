package db

import (
	"strings"
	"testing"
)

func TestRebindDollar(t *testing.T) {
	cases := map[string]string{
		"SELECT 1":                              "SELECT 1",
		"a = ? AND b = ?":                       "a = $1 AND b = $2",
		"x = '?' AND y = ?":                     "x = '?' AND y = $1",
		`"we?rd" = ? -- what?` + "\n" + "AND ?": `"we?rd" = $1 -- what?` + "\n" + "AND $2",
		"s = 'it''s ?' AND t = ?":               "s = 'it''s ?' AND t = $1",
		"unterminated '?":                       "unterminated '?",
	}
	for in, want := range cases {
		if got := rebindDollar(in); got != want {
			t.Errorf("rebind(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSplitStatements(t *testing.T) {
	fn := splitStatements("CREATE FUNCTION f() RETURNS int AS $$ BEGIN RETURN 1; END $$ LANGUAGE plpgsql; SELECT 1")
	if len(fn) != 2 || !strings.HasSuffix(fn[0], "plpgsql") {
		t.Fatalf("dollar quoting: %q", fn)
	}
	got := splitStatements("CREATE TABLE a (x TEXT DEFAULT ';');\n-- c; d\nCREATE TABLE b (y INT);;")
	if len(got) != 2 || got[0] != "CREATE TABLE a (x TEXT DEFAULT ';')" {
		t.Fatalf("%q", got)
	}
}
