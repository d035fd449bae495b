package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/pyjson"
)

// The query language of Weave's trace server (a MongoDB-like expression tree):
//
//	{"$expr": <operation>}
//	operation: {"$and": [op...]} {"$or": [op...]} {"$not": [op]} {"$eq": [a, b]} {"$gt": [a, b]}
//	           {"$gte": [a, b]} {"$lt": [a, b]} {"$lte": [a, b]} {"$in": [a, [b...]]}
//	           {"$contains": {"input": a, "substr": b, "case_insensitive": bool}}
//	operand:   an operation, {"$literal": value}, {"$getField": "dotted.path"},
//	           {"$convert": {"input": a, "to": "double"|"int"|"string"|"bool"|"exists"}}
//
// ParseQuery turns the JSON into a tree, Compile turns the tree into a parametrised SQL
// condition for either dialect.

// Node is a node of a query expression.
type Node interface{ isNode() }

// Literal is a constant.
type Literal struct{ V pyjson.Value }

// GetField reads a field (a column, or a dotted path into a JSON column).
type GetField struct{ Field string }

// Convert converts its input to a type.
type Convert struct {
	Input Node
	To    string
}

// Logic is $and or $or.
type Logic struct {
	Op  string // "and", "or"
	Ops []Node
}

// Not negates its operand.
type Not struct{ Op Node }

// Compare is $eq, $gt, $gte, $lt or $lte.
type Compare struct {
	Op   string // "eq", "gt", "gte", "lt", "lte"
	A, B Node
}

// In tests membership.
type In struct {
	A    Node
	List []Node
}

// Contains tests for a substring.
type Contains struct {
	Input, Substr   Node
	CaseInsensitive bool
}

func (Literal) isNode()  {}
func (GetField) isNode() {}
func (Convert) isNode()  {}
func (Logic) isNode()    {}
func (Not) isNode()      {}
func (Compare) isNode()  {}
func (In) isNode()       {}
func (Contains) isNode() {}

// MaxQueryDepth bounds the nesting of query expressions.
const MaxQueryDepth = 64

func qerr(path, format string, args ...any) error {
	return fault.Invalid("query", "query%s: %s", path, fmt.Sprintf(format, args...))
}

// ParseQuery parses a Weave query (`{"$expr": ...}`); nil or `null` is no query (nil node).
func ParseQuery(raw json.RawMessage) (Node, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	v, err := pyjson.Parse(raw)
	if err != nil {
		return nil, qerr("", "%v", err)
	}
	if v.Kind != pyjson.Object || len(v.Obj) != 1 || v.Obj[0].Key != "$expr" {
		return nil, qerr("", "must be an object with exactly the key \"$expr\"")
	}
	return parseOperation(v.Obj[0].Val, ".$expr", 0)
}

func single(v pyjson.Value, path string) (string, pyjson.Value, error) {
	if v.Kind != pyjson.Object || len(v.Obj) != 1 {
		return "", pyjson.Value{}, qerr(path, "expected an object with one operator key")
	}
	return v.Obj[0].Key, v.Obj[0].Val, nil
}

func parseOperation(v pyjson.Value, path string, depth int) (Node, error) {
	if depth > MaxQueryDepth {
		return nil, qerr(path, "nested deeper than %d levels", MaxQueryDepth)
	}
	key, arg, err := single(v, path)
	if err != nil {
		return nil, err
	}
	p := path + "." + key
	operands := func(n int) ([]Node, error) {
		if arg.Kind != pyjson.Array || (n >= 0 && len(arg.Arr) != n) {
			if n < 0 {
				return nil, qerr(p, "expected an array of operands")
			}
			return nil, qerr(p, "expected an array of %d operands", n)
		}
		out := make([]Node, len(arg.Arr))
		for i, el := range arg.Arr {
			if out[i], err = parseOperand(el, fmt.Sprintf("%s[%d]", p, i), depth+1); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	switch key {
	case "$and", "$or":
		ops, err := operands(-1)
		if err != nil {
			return nil, err
		}
		return Logic{Op: key[1:], Ops: ops}, nil
	case "$not":
		ops, err := operands(1)
		if err != nil {
			return nil, err
		}
		return Not{Op: ops[0]}, nil
	case "$eq", "$gt", "$gte", "$lt", "$lte":
		ops, err := operands(2)
		if err != nil {
			return nil, err
		}
		return Compare{Op: key[1:], A: ops[0], B: ops[1]}, nil
	case "$in":
		if arg.Kind != pyjson.Array || len(arg.Arr) != 2 || arg.Arr[1].Kind != pyjson.Array {
			return nil, qerr(p, "expected [operand, [operands...]]")
		}
		a, err := parseOperand(arg.Arr[0], p+"[0]", depth+1)
		if err != nil {
			return nil, err
		}
		list := make([]Node, len(arg.Arr[1].Arr))
		for i, el := range arg.Arr[1].Arr {
			if list[i], err = parseOperand(el, fmt.Sprintf("%s[1][%d]", p, i), depth+1); err != nil {
				return nil, err
			}
		}
		return In{A: a, List: list}, nil
	case "$contains":
		if arg.Kind != pyjson.Object {
			return nil, qerr(p, "expected {\"input\": ..., \"substr\": ..., \"case_insensitive\": bool}")
		}
		var c Contains
		for _, m := range arg.Obj {
			switch m.Key {
			case "input":
				c.Input, err = parseOperand(m.Val, p+".input", depth+1)
			case "substr":
				c.Substr, err = parseOperand(m.Val, p+".substr", depth+1)
			case "case_insensitive":
				if m.Val.Kind != pyjson.Bool && m.Val.Kind != pyjson.Null {
					return nil, qerr(p+".case_insensitive", "expected a boolean")
				}
				c.CaseInsensitive = m.Val.Bool
			default:
				return nil, qerr(p, "unknown key %q", m.Key)
			}
			if err != nil {
				return nil, err
			}
		}
		if c.Input == nil || c.Substr == nil {
			return nil, qerr(p, "needs both \"input\" and \"substr\"")
		}
		return c, nil
	}
	return nil, qerr(path, "unknown operation %q (operations: $and, $or, $not, $eq, $gt, $gte, $lt, $lte, $in, $contains; operands: $literal, $getField, $convert)", key)
}

func parseOperand(v pyjson.Value, path string, depth int) (Node, error) {
	if depth > MaxQueryDepth {
		return nil, qerr(path, "nested deeper than %d levels", MaxQueryDepth)
	}
	key, arg, err := single(v, path)
	if err != nil {
		return nil, err
	}
	p := path + "." + key
	switch key {
	case "$literal":
		return Literal{V: arg}, nil
	case "$getField":
		if arg.Kind != pyjson.String || arg.Str == "" {
			return nil, qerr(p, "expected a field name")
		}
		if err := checkFieldPath(arg.Str); err != nil {
			return nil, qerr(p, "%v", err)
		}
		return GetField{Field: arg.Str}, nil
	case "$convert":
		if arg.Kind != pyjson.Object {
			return nil, qerr(p, "expected {\"input\": ..., \"to\": ...}")
		}
		var c Convert
		for _, m := range arg.Obj {
			switch m.Key {
			case "input":
				if c.Input, err = parseOperand(m.Val, p+".input", depth+1); err != nil {
					return nil, err
				}
			case "to":
				switch m.Val.String() {
				case "double", "int", "string", "bool", "exists":
					c.To = m.Val.Str
				default:
					return nil, qerr(p+".to", "must be one of double, int, string, bool, exists")
				}
			default:
				return nil, qerr(p, "unknown key %q", m.Key)
			}
		}
		if c.Input == nil || c.To == "" {
			return nil, qerr(p, "needs both \"input\" and \"to\"")
		}
		return c, nil
	}
	return parseOperation(v, path, depth)
}

// checkFieldPath rejects empty segments (a leading or trailing dot, or "..").
func checkFieldPath(f string) error {
	for _, seg := range strings.Split(f, ".") {
		if seg == "" {
			return fmt.Errorf("invalid field %q: empty path segment", f)
		}
		// A double quote cannot be written in an SQLite JSON path; NUL and invalid UTF-8
		// cannot be PostgreSQL text.
		if strings.ContainsAny(seg, "\"\x00") || !utf8.ValidString(seg) {
			return fmt.Errorf("invalid field %q: a field name may not contain '\"', NUL or invalid UTF-8", f)
		}
	}
	return nil
}

// ValueType is the SQL-level type of a compiled expression.
type ValueType int

// Value types.
const (
	TAny  ValueType = iota // a JSON value of unknown type (SQLite json_extract)
	TText                  // text
	TNum                   // a number
	TBool                  // a condition
	// TEmptyText is a value that reads as '' when missing (a call's feedback fields, as in
	// Weave's ClickHouse server); compared as a number, '' is NULL.
	TEmptyText
)

// FieldResolver maps a field name of a query to a SQL expression and its type. It returns an
// invalid-request fault (internal/fault) for unknown fields.
type FieldResolver func(field string) (sql string, args []any, t ValueType, err error)

// Compiler compiles query trees into SQL conditions.
type Compiler struct {
	Dialect db.Dialect
	Resolve FieldResolver
	args    []any
}

// Compile returns a SQL condition for n and its arguments.
func (c *Compiler) Compile(n Node) (string, []any, error) {
	c.args = nil
	s, err := c.cond(n)
	return s, c.args, err
}

func (c *Compiler) arg(v any) string {
	c.args = append(c.args, v)
	return "?"
}

// literal returns a parameter for a scalar literal and its type.
func (c *Compiler) literal(v pyjson.Value) (string, ValueType, error) {
	switch v.Kind {
	case pyjson.Null:
		return "NULL", TAny, nil
	case pyjson.Bool:
		if c.Dialect == db.Postgres {
			if v.Bool {
				return c.arg("true"), TText, nil
			}
			return c.arg("false"), TText, nil
		}
		if v.Bool {
			return c.arg(1), TNum, nil
		}
		return c.arg(0), TNum, nil
	case pyjson.Int, pyjson.Float:
		f, err := strconv.ParseFloat(v.Str, 64)
		if err != nil || math.IsInf(f, 0) {
			return "", 0, qerr("", "number out of range: %s", v.Str)
		}
		if v.Kind == pyjson.Int {
			if i, err := strconv.ParseInt(v.Str, 10, 64); err == nil {
				return c.arg(i), TNum, nil
			}
		}
		return c.arg(f), TNum, nil
	case pyjson.String:
		if c.Dialect == db.Postgres {
			return c.arg(PGText(v.Str)), TText, nil
		}
		return c.arg(v.Str), TText, nil
	}
	// Arrays and objects compare as their JSON text.
	return c.arg(string(pyjson.Compact(v))), TText, nil
}

// value compiles an operand into a SQL value expression.
func (c *Compiler) value(n Node) (string, ValueType, error) {
	switch n := n.(type) {
	case Literal:
		return c.literal(n.V)
	case GetField:
		if err := checkFieldPath(n.Field); err != nil {
			return "", 0, qerr("", "%v", err)
		}
		s, args, t, err := c.Resolve(n.Field)
		if err != nil {
			return "", 0, err
		}
		c.args = append(c.args, args...)
		return s, t, nil
	case Convert:
		in, t, err := c.value(n.Input)
		if err != nil {
			return "", 0, err
		}
		return c.convert(in, t, n.To)
	default:
		s, err := c.cond(n)
		return s, TBool, err
	}
}

func (c *Compiler) convert(in string, t ValueType, to string) (string, ValueType, error) {
	pg := c.Dialect == db.Postgres
	switch to {
	case "double":
		if pg {
			return "hone_try_float((" + in + ")::text)", TNum, nil
		}
		return "CAST(" + in + " AS REAL)", TNum, nil
	case "int":
		if pg {
			return "trunc(hone_try_float((" + in + ")::text))", TNum, nil
		}
		return "CAST(" + in + " AS INTEGER)", TNum, nil
	case "string":
		if pg {
			return "(" + in + ")::text", TText, nil
		}
		return "CAST(" + in + " AS TEXT)", TText, nil
	case "bool":
		if pg {
			return "(lower((" + in + ")::text) IN ('true', '1', 't'))", TBool, nil
		}
		return "(" + in + " IN (1, 'true', 'True', '1'))", TBool, nil
	case "exists":
		return "(" + in + " IS NOT NULL)", TBool, nil
	}
	return "", 0, qerr("", "unknown conversion %q", to)
}

// numeric makes a value comparable as a number.
func (c *Compiler) numeric(s string, t ValueType) string {
	if t == TNum {
		return s
	}
	if c.Dialect == db.Postgres {
		return "hone_try_float((" + s + ")::text)"
	}
	if t == TEmptyText {
		return "NULLIF(" + s + ", '')"
	}
	return s // SQLite compares stored numbers numerically already
}

// text makes a value comparable as text.
func (c *Compiler) text(s string, t ValueType) string {
	if c.Dialect == db.Postgres && t != TText {
		return "(" + s + ")::text"
	}
	return s
}

// cond compiles n as a condition.
func (c *Compiler) cond(n Node) (string, error) {
	switch n := n.(type) {
	case Logic:
		if len(n.Ops) == 0 {
			if n.Op == "and" {
				return "(1=1)", nil
			}
			return "(1=0)", nil
		}
		parts := make([]string, len(n.Ops))
		for i, op := range n.Ops {
			s, err := c.cond(op)
			if err != nil {
				return "", err
			}
			parts[i] = s
		}
		return "(" + strings.Join(parts, " "+strings.ToUpper(n.Op)+" ") + ")", nil
	case Not:
		s, err := c.cond(n.Op)
		if err != nil {
			return "", err
		}
		return "(NOT COALESCE(" + s + ", FALSE))", nil
	case Compare:
		return c.compare(n)
	case In:
		a, at, err := c.value(n.A)
		if err != nil {
			return "", err
		}
		if len(n.List) == 0 {
			return "(1=0)", nil
		}
		items := make([]string, len(n.List))
		numeric := true
		types := make([]ValueType, len(n.List))
		for i, el := range n.List {
			items[i], types[i], err = c.value(el)
			if err != nil {
				return "", err
			}
			numeric = numeric && types[i] == TNum
		}
		if numeric {
			a = c.numeric(a, at)
		} else {
			a = c.text(a, at)
			for i := range items {
				items[i] = c.text(items[i], types[i])
			}
		}
		return "(" + a + " IN (" + strings.Join(items, ", ") + "))", nil
	case Contains:
		in, it, err := c.value(n.Input)
		if err != nil {
			return "", err
		}
		sub, st, err := c.value(n.Substr)
		if err != nil {
			return "", err
		}
		in, sub = c.text(in, it), c.text(sub, st)
		if n.CaseInsensitive {
			in, sub = "lower("+in+")", "lower("+sub+")"
		}
		if c.Dialect == db.Postgres {
			return "(strpos(" + in + ", " + sub + ") > 0)", nil
		}
		return "(instr(" + in + ", " + sub + ") > 0)", nil
	case Literal:
		// A literal used as a condition has Python truthiness.
		if truthy(n.V) {
			return "(1=1)", nil
		}
		return "(1=0)", nil
	case GetField, Convert:
		s, t, err := c.value(n)
		if err != nil {
			return "", err
		}
		if t == TBool {
			return s, nil
		}
		if c.Dialect == db.Postgres {
			return "(lower((" + s + ")::text) IN ('true', '1', 't'))", nil
		}
		return "(" + s + " IN (1, 'true'))", nil
	}
	return "", qerr("", "unsupported expression")
}

func truthy(v pyjson.Value) bool {
	switch v.Kind {
	case pyjson.Null:
		return false
	case pyjson.Bool:
		return v.Bool
	case pyjson.Int, pyjson.Float:
		f, _ := strconv.ParseFloat(v.Str, 64)
		return f != 0
	case pyjson.String:
		return v.Str != ""
	case pyjson.Array:
		return len(v.Arr) > 0
	case pyjson.Object:
		return len(v.Obj) > 0
	}
	return false
}

func (c *Compiler) compare(n Compare) (string, error) {
	// `x == null` is `x IS NULL`.
	if lit, ok := n.B.(Literal); ok && lit.V.Kind == pyjson.Null && n.Op == "eq" {
		a, _, err := c.value(n.A)
		return "(" + a + " IS NULL)", err
	}
	if lit, ok := n.A.(Literal); ok && lit.V.Kind == pyjson.Null && n.Op == "eq" {
		b, _, err := c.value(n.B)
		return "(" + b + " IS NULL)", err
	}
	a, at, err := c.value(n.A)
	if err != nil {
		return "", err
	}
	b, bt, err := c.value(n.B)
	if err != nil {
		return "", err
	}
	if at == TNum || bt == TNum {
		a, b = c.numeric(a, at), c.numeric(b, bt)
	} else if at == TBool || bt == TBool {
		// compare conditions as they are
	} else {
		a, b = c.text(a, at), c.text(b, bt)
	}
	op := map[string]string{"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[n.Op]
	return "(" + a + " " + op + " " + b + ")", nil
}

// JSONPathArg returns the dialect's path argument for a dotted path inside a JSON column:
// SQLite `$."a"[0]."b"` (digit-only segments index arrays), Postgres a text[] literal.
func JSONPathArg(d db.Dialect, segs []string) string {
	if d == db.Postgres {
		quoted := make([]string, len(segs))
		for i, s := range segs {
			quoted[i] = `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
		}
		return "{" + strings.Join(quoted, ",") + "}"
	}
	var b strings.Builder
	b.WriteString("$")
	for _, s := range segs {
		if isDigits(s) {
			b.WriteString("[" + s + "]")
			continue
		}
		b.WriteString(`."` + strings.ReplaceAll(s, `"`, `\"`) + `"`)
	}
	return b.String()
}

func isDigits(s string) bool {
	if s == "" || len(s) > 9 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// PGText is how PostgreSQL queries see a string of a JSON value: a JSON column's value is
// read through hone_jsonb, which reads a NUL character (\u0000, which jsonb cannot hold) as
// U+FFFF and a lone surrogate as U+FFFD, and a string literal compared with it is mapped the
// same way (it also could not be bound as text otherwise). Stored values are untouched.
func PGText(s string) string {
	if strings.IndexByte(s, 0) < 0 && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		c := s[i]
		if c == 0 {
			b.WriteRune('\uffff')
			i++
			continue
		}
		// A WTF-8 surrogate (ED A0..BF 80..BF) is one lone surrogate.
		if c == 0xED && i+2 < len(s) && s[i+1] >= 0xA0 && s[i+1] <= 0xBF && s[i+2] >= 0x80 && s[i+2] <= 0xBF {
			b.WriteRune(utf8.RuneError)
			i += 3
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		b.WriteRune(r)
		i += n
	}
	return b.String()
}

// JSONField returns SQL reading a dotted path out of a JSON text column, with its argument.
func JSONField(d db.Dialect, col string, segs []string) (string, []any, ValueType) {
	if d == db.Postgres {
		return "(hone_jsonb(" + col + ") #>> ?::text[])", []any{JSONPathArg(d, segs)}, TAny
	}
	return "json_extract(" + col + ", ?)", []any{JSONPathArg(d, segs)}, TAny
}

// SortSQL returns an ORDER BY clause body for sorts, resolving fields with resolve and
// validating directions. Missing values sort last in both directions; JSON values of mixed
// types sort deterministically (SQLite: numbers, then text; PostgreSQL: numbers numerically,
// then everything else as text).
func SortSQL(d db.Dialect, sorts []SortBy, resolve FieldResolver, param string) (string, []any, error) {
	return sortSQLFrom(d, sorts, resolve, param, 0)
}

// sortSQLFrom is SortSQL of sorts[first:], whose errors name their index in sorts.
func sortSQLFrom(d db.Dialect, sorts []SortBy, resolve FieldResolver, param string, first int) (string, []any, error) {
	var parts []string
	var args []any
	for i := first; i < len(sorts); i++ {
		s := sorts[i]
		dir := strings.ToLower(s.Dir())
		if dir == "" {
			dir = "asc"
		}
		if dir != "asc" && dir != "desc" {
			return "", nil, fault.Invalid(fmt.Sprintf("%s[%d].direction", param, i), "%s[%d]: invalid sort direction %q (asc or desc)", param, i, s.Dir())
		}
		if err := checkFieldPath(s.Field); err != nil {
			return "", nil, fault.Invalid(fmt.Sprintf("%s[%d].field", param, i), "%s[%d]: %v", param, i, err)
		}
		expr, a, t, err := resolve(s.Field)
		if err != nil {
			return "", nil, err
		}
		D := strings.ToUpper(dir)
		if d == db.Postgres && t == TAny {
			num := "hone_try_float(" + expr + ")"
			parts = append(parts, "("+expr+") IS NULL", num+" IS NULL "+D, num+" "+D, expr+" "+D)
			for k := 0; k < 4; k++ {
				args = append(args, a...)
			}
			continue
		}
		parts = append(parts, "("+expr+") IS NULL", expr+" "+D)
		args = append(args, a...)
		args = append(args, a...)
	}
	return strings.Join(parts, ", "), args, nil
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
