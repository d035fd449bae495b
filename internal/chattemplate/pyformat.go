package chattemplate

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unsafe"

	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/nodes"
	"github.com/nikolalohinski/gonja/v2/tokens"
)

// modFilter is the filter every `a % b` of a template is rewritten into (see rewriteModulo):
// gonja evaluates `%` only as integer modulo, while Jinja2 follows Python, where a string on
// the left means printf-style formatting.
// modTupleFilter is the same with a tuple literal on the right, whose items are the
// arguments (any other right side, a list included, is one argument, as in Python).
const (
	modFilter      = "__hone_mod"
	modTupleFilter = "__hone_mod_tuple"
)

// rewriteModulo replaces each binary `%` expression in the parsed template by the filter call
// `left | __hone_mod(right)`, and gives each subscript Python's negative indices (pythonIndex).
// The tree already encodes precedence, so the rewrite keeps it.
// gonja v2.9.1 (pinned) offers no visitor over expressions, so the walk is by reflection.
func rewriteModulo(root *nodes.Template) {
	seen := map[uintptr]bool{}
	exprType := reflect.TypeOf((*nodes.Expression)(nil)).Elem()
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			// Parent links and tokens lead back up or nowhere interesting.
			if _, ok := v.Interface().(*tokens.Token); ok {
				return
			}
			walk(v.Elem())
			if g, ok := v.Interface().(*nodes.GetItem); ok {
				pythonIndex(g) // see negindex.go
			}
		case reflect.Interface:
			if v.IsNil() {
				return
			}
			walk(v.Elem())
			if v.Type() == exprType && v.CanSet() {
				if r := modRewrite(v.Interface()); r != nil {
					v.Set(reflect.ValueOf(r))
				}
			}
		case reflect.Struct:
			for i := 0; i < v.NumField(); i++ {
				f := v.Field(i)
				if !v.Type().Field(i).IsExported() {
					// Control structures (set, for, if, ...) keep their expressions in
					// unexported fields; the tree is ours until the template is first run.
					if !f.CanAddr() {
						continue
					}
					f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
				}
				walk(f)
			}
		case reflect.Slice, reflect.Array:
			for i := 0; i < v.Len(); i++ {
				walk(v.Index(i))
			}
		case reflect.Map:
			iter := v.MapRange()
			for iter.Next() {
				val := iter.Value()
				if val.Kind() == reflect.Interface && val.Type() == exprType {
					walk(val)
					if r := modRewrite(val.Interface()); r != nil {
						v.SetMapIndex(iter.Key(), reflect.ValueOf(r))
					}
					continue
				}
				walk(val)
			}
		}
	}
	walk(reflect.ValueOf(root))
}

func modRewrite(x any) nodes.Expression {
	b, ok := x.(*nodes.BinaryExpression)
	if !ok || b.Operator == nil || b.Operator.Token == nil || b.Operator.Token.Type != tokens.Modulo {
		return nil
	}
	name := modFilter
	if _, ok := b.Right.(*nodes.Tuple); ok {
		name = modTupleFilter
	}
	return &nodes.FilteredExpression{
		Expression: b.Left,
		Filters:    []*nodes.FilterCall{{Token: b.Operator.Token, Name: name, Args: []nodes.Expression{b.Right}, Kwargs: map[string]nodes.Expression{}}},
	}
}

// filterMod is Python's `%`: printf-style formatting when the left side is a string, else the
// modulo whose result takes the sign of the divisor.
func filterMod(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	return mod(in, params, false)
}

func filterModTuple(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	return mod(in, params, true)
}

func mod(in *exec.Value, params *exec.VarArgs, tuple bool) *exec.Value {
	if in.IsError() {
		return in
	}
	if len(params.Args) != 1 {
		return exec.AsValue(errors.New("% needs a right operand"))
	}
	right := params.Args[0]
	if in.IsString() {
		s, err := pyFormat(in.String(), right.Interface(), tuple)
		if err != nil {
			return exec.AsValue(err)
		}
		return exec.AsValue(s)
	}
	if !in.IsNumber() || !right.IsNumber() {
		return exec.AsValue(fmt.Errorf("unsupported operand type(s) for %%: '%s' and '%s'", pyTypeName(in.Interface()), pyTypeName(right.Interface())))
	}
	if in.IsInteger() && right.IsInteger() {
		a, b := in.Integer(), right.Integer()
		if b == 0 {
			return exec.AsValue(errors.New("integer modulo by zero"))
		}
		m := a % b
		if m != 0 && (m < 0) != (b < 0) {
			m += b
		}
		return exec.AsValue(m)
	}
	a, b := in.Float(), right.Float()
	if b == 0 {
		return exec.AsValue(errors.New("float modulo"))
	}
	m := math.Mod(a, b)
	if m != 0 && (m < 0) != (b < 0) {
		m += b
	}
	return exec.AsValue(m)
}

func pyTypeName(v any) string {
	switch normalize(v).(type) {
	case nil:
		return "NoneType"
	case string:
		return "str"
	case bool:
		return "bool"
	case int:
		return "int"
	case float64:
		return "float"
	case []any:
		return "list"
	case exec.Dict:
		return "dict"
	}
	return reflect.TypeOf(v).String()
}

// pyFormat implements Python's printf-style `format % args`: flags -+ #0, width, precision
// (either may be `*`), conversions s r a d i u o x X e E f F g G c %, and %(key)s with a
// mapping. Errors use Python's messages.
func pyFormat(format string, arg any, tuple bool) (string, error) {
	var args []any
	var mapping exec.Dict
	isMap := false
	arg = normalize(arg)
	switch a := arg.(type) {
	case []any:
		if tuple {
			args = a
		} else {
			args = []any{a}
		}
	case exec.Dict:
		mapping, isMap = a, true
		args = []any{a}
	default:
		args = []any{a}
	}
	next := 0
	take := func() (any, error) {
		if next >= len(args) {
			return nil, errors.New("not enough arguments for format string")
		}
		next++
		return args[next-1], nil
	}
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(format) {
			return "", errors.New("incomplete format")
		}
		var val any
		haveVal := false
		if format[i] == '(' {
			depth, j := 1, i+1
			for ; j < len(format) && depth > 0; j++ {
				switch format[j] {
				case '(':
					depth++
				case ')':
					depth--
				}
			}
			if depth != 0 {
				return "", errors.New("incomplete format key")
			}
			if !isMap {
				return "", errors.New("format requires a mapping")
			}
			key := format[i+1 : j-1]
			v, ok := dictLookup(mapping, key)
			if !ok {
				return "", fmt.Errorf("KeyError: '%s'", key)
			}
			val, haveVal = v, true
			i = j
		}
		var flags string
		for i < len(format) && strings.IndexByte("-+ #0", format[i]) >= 0 {
			flags += string(format[i])
			i++
		}
		width, prec := -1, -1
		num := func() (int, error) {
			if i < len(format) && format[i] == '*' {
				i++
				v, err := take()
				if err != nil {
					return 0, err
				}
				n, ok := v.(int)
				if !ok {
					return 0, errors.New("* wants int")
				}
				return n, nil
			}
			start := i
			for i < len(format) && format[i] >= '0' && format[i] <= '9' {
				i++
			}
			if start == i {
				return -1, nil
			}
			return strconv.Atoi(format[start:i])
		}
		var err error
		if width, err = num(); err != nil {
			return "", err
		}
		if width < -1 {
			flags += "-"
			width = -width
		}
		if i < len(format) && format[i] == '.' {
			i++
			if prec, err = num(); err != nil {
				return "", err
			}
			if prec < 0 {
				prec = 0
			}
		}
		for i < len(format) && strings.IndexByte("hlL", format[i]) >= 0 {
			i++
		}
		if i >= len(format) {
			return "", errors.New("incomplete format")
		}
		conv := format[i]
		if conv == '%' {
			b.WriteByte('%')
			continue
		}
		if strings.IndexByte("sradiuoxXeEfFgGc", conv) < 0 {
			return "", fmt.Errorf("unsupported format character '%c' (0x%x) at index %d", conv, conv, i)
		}
		if !haveVal {
			if val, err = take(); err != nil {
				return "", err
			}
		}
		s, err := formatOne(conv, flags, prec, val)
		if err != nil {
			return "", err
		}
		b.WriteString(pad(s, width, flags, string(conv)))
	}
	if !isMap && next < len(args) {
		return "", errors.New("not all arguments converted during string formatting")
	}
	return b.String(), nil
}

func dictLookup(d exec.Dict, key string) (any, bool) {
	for _, p := range d.Pairs {
		if p.Key.String() == key {
			return p.Value.Interface(), true
		}
	}
	return nil, false
}

func pad(s string, width int, flags, conv string) string {
	n := len([]rune(s))
	if width <= n {
		return s
	}
	fill := width - n
	switch {
	case strings.Contains(flags, "-"):
		return s + strings.Repeat(" ", fill)
	case strings.Contains(flags, "0") && strings.Contains("diuoxXeEfFgG", conv):
		sign := ""
		if s != "" && strings.ContainsAny(s[:1], "+- ") {
			sign, s = s[:1], s[1:]
		}
		if strings.HasPrefix(s, "0x") || strings.HasPrefix(s, "0X") || strings.HasPrefix(s, "0o") {
			sign, s = sign+s[:2], s[2:]
		}
		return sign + strings.Repeat("0", fill) + s
	}
	return strings.Repeat(" ", fill) + s
}

func formatOne(conv byte, flags string, prec int, v any) (string, error) {
	v = normalize(v)
	sign := func(s string, neg bool) string {
		switch {
		case neg:
			return "-" + s
		case strings.Contains(flags, "+"):
			return "+" + s
		case strings.Contains(flags, " "):
			return " " + s
		}
		return s
	}
	switch conv {
	case 's':
		s := pyStr(v)
		if prec >= 0 && prec < len([]rune(s)) {
			s = string([]rune(s)[:prec])
		}
		return s, nil
	case 'r', 'a':
		s := pyRepr(v)
		if prec >= 0 && prec < len([]rune(s)) {
			s = string([]rune(s)[:prec])
		}
		return s, nil
	case 'd', 'i', 'u', 'o', 'x', 'X', 'c':
		var n int
		switch x := v.(type) {
		case int:
			n = x
		case bool:
			if x {
				n = 1
			}
		case float64:
			if conv == 'c' {
				return "", errors.New("%c requires int or char")
			}
			n = int(x)
		case string:
			if conv == 'c' && len([]rune(x)) == 1 {
				return x, nil
			}
			return "", fmt.Errorf("%%%c format: a real number is required, not str", conv)
		default:
			return "", fmt.Errorf("%%%c format: a real number is required, not %s", conv, pyTypeName(v))
		}
		if conv == 'c' {
			return string(rune(n)), nil
		}
		neg := n < 0
		if neg {
			n = -n
		}
		var s string
		switch conv {
		case 'o':
			s = strconv.FormatInt(int64(n), 8)
			if strings.Contains(flags, "#") {
				s = "0o" + s
			}
		case 'x':
			s = strconv.FormatInt(int64(n), 16)
			if strings.Contains(flags, "#") {
				s = "0x" + s
			}
		case 'X':
			s = strings.ToUpper(strconv.FormatInt(int64(n), 16))
			if strings.Contains(flags, "#") {
				s = "0X" + s
			}
		default:
			s = strconv.Itoa(n)
		}
		if prec > 0 && len(s) < prec {
			s = strings.Repeat("0", prec-len(s)) + s
		}
		return sign(s, neg), nil
	case 'e', 'E', 'f', 'F', 'g', 'G':
		var f float64
		switch x := v.(type) {
		case int:
			f = float64(x)
		case float64:
			f = x
		case bool:
			if x {
				f = 1
			}
		default:
			return "", fmt.Errorf("must be real number, not %s", pyTypeName(v))
		}
		if prec < 0 {
			prec = 6
		}
		neg := math.Signbit(f) && !math.IsNaN(f)
		f = math.Abs(f)
		var s string
		switch {
		case math.IsInf(f, 0):
			s = "inf"
		case math.IsNaN(f):
			s = "nan"
		case conv == 'g' || conv == 'G':
			if prec == 0 {
				prec = 1
			}
			s = strconv.FormatFloat(f, 'g', prec, 64)
			if strings.Contains(flags, "#") && !strings.Contains(s, ".") {
				s += "."
			}
		default:
			s = strconv.FormatFloat(f, conv|0x20, prec, 64)
		}
		if conv >= 'A' && conv <= 'Z' {
			s = strings.ToUpper(s)
		}
		return sign(s, neg), nil
	}
	return "", fmt.Errorf("unsupported format character '%c' (0x%x)", conv, conv)
}

// normalize turns the Go values gonja hands filters into the few kinds Python has.
func normalize(v any) any {
	switch x := v.(type) {
	case nil, string, bool, int, float64, []any, exec.Dict:
		return v
	case *exec.Dict:
		return *x
	case *exec.Value:
		return normalize(x.Interface())
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return int(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return int(rv.Uint())
	case reflect.Float32, reflect.Float64:
		return rv.Float()
	case reflect.String:
		return rv.String()
	case reflect.Bool:
		return rv.Bool()
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = normalize(rv.Index(i).Interface())
		}
		return out
	case reflect.Map:
		d := exec.Dict{}
		iter := rv.MapRange()
		for iter.Next() {
			d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(iter.Key().Interface()), Value: exec.AsValue(iter.Value().Interface())})
		}
		return d
	case reflect.Pointer:
		if rv.IsNil() {
			return nil
		}
		return normalize(rv.Elem().Interface())
	}
	return fmt.Sprint(v)
}

// pyStr is Python's str() of a template value.
func pyStr(v any) string {
	switch x := normalize(v).(type) {
	case nil:
		return "None"
	case string:
		return x
	case bool:
		if x {
			return "True"
		}
		return "False"
	case float64:
		return pyFloat(x)
	case int:
		return strconv.Itoa(x)
	}
	return pyRepr(v)
}

func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	if f == 0 {
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	if exp := math.Floor(math.Log10(math.Abs(f))); exp >= -4 && exp < 16 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	return strconv.FormatFloat(f, 'e', -1, 64)
}

// pyRepr is Python's repr() of a template value.
func pyRepr(v any) string {
	v = normalize(v)
	switch x := v.(type) {
	case string:
		q := "'"
		if strings.Contains(x, "'") && !strings.Contains(x, `"`) {
			q = `"`
		}
		var b strings.Builder
		b.WriteString(q)
		for _, r := range x {
			switch {
			case r == '\\':
				b.WriteString(`\\`)
			case string(r) == q:
				b.WriteString(`\` + q)
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\r':
				b.WriteString(`\r`)
			case r == '\t':
				b.WriteString(`\t`)
			case r < 0x20 || r == 0x7f:
				fmt.Fprintf(&b, `\x%02x`, r)
			default:
				b.WriteRune(r)
			}
		}
		b.WriteString(q)
		return b.String()
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case exec.Dict:
		parts := make([]string, len(x.Pairs))
		for i, p := range x.Pairs {
			parts[i] = pyRepr(p.Key.Interface()) + ": " + pyRepr(p.Value.Interface())
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return pyStr(v)
}
