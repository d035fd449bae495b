package chattemplate

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"

	"github.com/honeai/hone/internal/pyjson"
)

// toValue turns parsed JSON into template values: objects become ordered exec.Dicts, arrays
// []any, numbers int (when integral in the source) or float64.
func toValue(v pyjson.Value) any {
	switch v.Kind {
	case pyjson.Null:
		return nil
	case pyjson.Bool:
		return v.Bool
	case pyjson.Int:
		if i, err := strconv.ParseInt(v.Str, 10, 64); err == nil {
			return int(i)
		}
		f, _ := strconv.ParseFloat(v.Str, 64)
		return f
	case pyjson.Float:
		f, _ := strconv.ParseFloat(v.Str, 64)
		return f
	case pyjson.String:
		return v.Str
	case pyjson.Array:
		out := make([]any, len(v.Arr))
		for i, it := range v.Arr {
			out[i] = toValue(it)
		}
		return out
	case pyjson.Object:
		d := exec.Dict{Pairs: make([]*exec.Pair, 0, len(v.Obj))}
		for _, m := range v.Obj {
			d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(m.Key), Value: exec.AsValue(toValue(m.Val))})
		}
		return d
	}
	return nil
}

func dictGet(d exec.Dict, key string) any {
	for _, p := range d.Pairs {
		if p.Key.String() == key {
			return p.Value.Interface()
		}
	}
	return nil
}

func dictSet(d *exec.Dict, key string, v any) {
	for _, p := range d.Pairs {
		if p.Key.String() == key {
			p.Value = exec.AsValue(v)
			return
		}
	}
	d.Pairs = append(d.Pairs, &exec.Pair{Key: exec.AsValue(key), Value: exec.AsValue(v)})
}

func parseArray(data []byte, field string) ([]any, error) {
	v, err := pyjson.Parse(data)
	if err != nil {
		return nil, &TemplateError{Msg: fmt.Sprintf("%s: %v", field, err)}
	}
	if v.Kind != pyjson.Array {
		return nil, &TemplateError{Msg: field + " must be an array"}
	}
	return toValue(v).([]any), nil
}

// parseMessages decodes the messages and applies the preprocessing vLLM does before
// rendering: list content joined into text unless the template iterates over parts;
// tool-call arguments given as JSON strings parsed into objects (empty string: {});
// reasoning_content offered as reasoning too.
func parseMessages(data []byte, keepParts bool) ([]any, error) {
	list, err := parseArray(data, "messages")
	if err != nil {
		return nil, err
	}
	for i, m := range list {
		d, ok := m.(exec.Dict)
		if !ok {
			return nil, &TemplateError{Msg: fmt.Sprintf("messages[%d] must be an object", i)}
		}
		if parts, ok := dictGet(d, "content").([]any); ok {
			var texts []string
			for j, p := range parts {
				if pd, ok := p.(exec.Dict); ok {
					if t, _ := dictGet(pd, "type").(string); mediaParts[t] {
						return nil, &MediaPartError{Path: fmt.Sprintf("messages[%d].content[%d]", i, j), Type: t}
					}
					if t, ok := dictGet(pd, "text").(string); ok {
						texts = append(texts, t)
					}
				} else if s, ok := p.(string); ok {
					texts = append(texts, s)
				}
			}
			if !keepParts {
				dictSet(&d, "content", strings.Join(texts, "\n"))
			}
		}
		if calls, ok := dictGet(d, "tool_calls").([]any); ok {
			for _, c := range calls {
				cd, ok := c.(exec.Dict)
				if !ok {
					continue
				}
				fn, ok := dictGet(cd, "function").(exec.Dict)
				if !ok {
					continue
				}
				if args, ok := dictGet(fn, "arguments").(string); ok {
					if strings.TrimSpace(args) == "" {
						dictSet(&fn, "arguments", exec.Dict{})
					} else if pv, err := pyjson.Parse([]byte(args)); err == nil {
						dictSet(&fn, "arguments", toValue(pv))
					}
				}
			}
		}
		if rc, ok := dictGet(d, "reasoning_content").(string); ok && dictGet(d, "reasoning") == nil {
			dictSet(&d, "reasoning", rc)
		}
		list[i] = d
	}
	return list, nil
}

// asDict returns the ordered dictionary behind a template value, if it is one.
func asDict(v any) (exec.Dict, bool) {
	switch d := v.(type) {
	case exec.Dict:
		return d, true
	case *exec.Dict:
		return *d, true
	case *exec.Value:
		return asDict(d.Interface())
	}
	return exec.Dict{}, false
}

func pairsOf(self map[string]any, selfValue *exec.Value) [][2]any {
	var out [][2]any
	if d, ok := asDict(selfValue.Interface()); ok {
		for _, p := range d.Pairs {
			out = append(out, [2]any{p.Key.Interface(), p.Value.Interface()})
		}
		return out
	}
	keys := make([]string, 0, len(self))
	for k := range self {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, [2]any{k, self[k]})
	}
	return out
}

func dictItems(self map[string]any, selfValue *exec.Value, args *exec.VarArgs) (any, error) {
	var out []any
	for _, p := range pairsOf(self, selfValue) {
		out = append(out, []any{p[0], p[1]})
	}
	return out, nil
}

func dictKeys(self map[string]any, selfValue *exec.Value, args *exec.VarArgs) (any, error) {
	var out []any
	for _, p := range pairsOf(self, selfValue) {
		out = append(out, p[0])
	}
	return out, nil
}

func dictValues(self map[string]any, selfValue *exec.Value, args *exec.VarArgs) (any, error) {
	var out []any
	for _, p := range pairsOf(self, selfValue) {
		out = append(out, p[1])
	}
	return out, nil
}

func filterItems(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsNil() {
		return exec.AsValue([]any{})
	}
	if d, ok := asDict(in.Interface()); ok {
		out := make([]any, 0, len(d.Pairs))
		for _, p := range d.Pairs {
			out = append(out, []any{p.Key.Interface(), p.Value.Interface()})
		}
		return exec.AsValue(out)
	}
	if in.IsDict() {
		items, _ := dictItems(nil, in, params)
		if m, ok := in.ToGoSimpleType(false).(map[string]any); ok {
			items, _ = dictItems(m, in, params)
		}
		return exec.AsValue(items)
	}
	return in
}

// filterToJSON is HF's tojson: json.dumps(x, ensure_ascii=False, indent=indent,
// separators=separators, sort_keys=sort_keys).
func filterToJSON(e *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	indent := -1
	sortKeys := false
	for k, v := range params.KwArgs {
		switch k {
		case "indent":
			if !v.IsNil() {
				indent = v.Integer()
			}
		case "sort_keys":
			sortKeys = v.IsTrue()
		case "ensure_ascii", "separators":
		default:
			return exec.AsValue(fmt.Errorf("tojson() got an unexpected keyword argument '%s'", k))
		}
	}
	if len(params.Args) > 0 && !params.Args[0].IsNil() {
		indent = params.Args[0].Integer()
	}
	var b strings.Builder
	if err := dumpJSON(&b, in.Interface(), indent, sortKeys, 0); err != nil {
		return exec.AsValue(err)
	}
	return exec.AsSafeValue(b.String())
}

func dumpJSON(b *strings.Builder, v any, indent int, sortKeys bool, level int) error {
	if level > 200 {
		return fmt.Errorf("tojson: value nested too deeply")
	}
	newline := func(l int) {
		if indent >= 0 {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(" ", indent*l))
		}
	}
	itemSep := ", "
	if indent >= 0 {
		itemSep = ","
	}
	writePairs := func(keys []string, get func(i int) any) error {
		if len(keys) == 0 {
			b.WriteString("{}")
			return nil
		}
		order := make([]int, len(keys))
		for i := range order {
			order[i] = i
		}
		if sortKeys {
			sort.SliceStable(order, func(x, y int) bool { return keys[order[x]] < keys[order[y]] })
		}
		b.WriteByte('{')
		for n, i := range order {
			if n > 0 {
				b.WriteString(itemSep)
			}
			newline(level + 1)
			writeString(b, keys[i])
			b.WriteString(": ")
			if err := dumpJSON(b, get(i), indent, sortKeys, level+1); err != nil {
				return err
			}
		}
		newline(level)
		b.WriteByte('}')
		return nil
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case *exec.Value:
		return dumpJSON(b, x.Interface(), indent, sortKeys, level)
	case exec.Dict, *exec.Dict:
		d, _ := asDict(x)
		keys := make([]string, len(d.Pairs))
		for i, p := range d.Pairs {
			keys[i] = p.Key.String()
		}
		return writePairs(keys, func(i int) any { return d.Pairs[i].Value.Interface() })
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return writePairs(keys, func(i int) any { return x[keys[i]] })
	case string:
		writeString(b, x)
	case bool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case int:
		b.WriteString(strconv.Itoa(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case float64:
		switch {
		case math.IsNaN(x):
			b.WriteString("NaN")
		case math.IsInf(x, 1):
			b.WriteString("Infinity")
		case math.IsInf(x, -1):
			b.WriteString("-Infinity")
		default:
			b.Write(pyjson.AppendFloatRepr(nil, x))
		}
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, it := range x {
			if i > 0 {
				b.WriteString(itemSep)
			}
			newline(level + 1)
			if err := dumpJSON(b, it, indent, sortKeys, level+1); err != nil {
				return err
			}
		}
		newline(level)
		b.WriteByte(']')
	default:
		rv := reflect.ValueOf(v)
		switch rv.Kind() {
		case reflect.Slice, reflect.Array:
			items := make([]any, rv.Len())
			for i := range items {
				items[i] = rv.Index(i).Interface()
			}
			return dumpJSON(b, items, indent, sortKeys, level)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			fmt.Fprintf(b, "%d", v)
		case reflect.Float32:
			b.Write(pyjson.AppendFloatRepr(nil, rv.Float()))
		default:
			return fmt.Errorf("tojson: Object of type %T is not JSON serializable", v)
		}
	}
	return nil
}

// writeString writes s as Python's json.dumps(ensure_ascii=False) does.
func writeString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c < 0x20:
			fmt.Fprintf(b, `\u%04x`, c)
		case c < utf8.RuneSelf:
			b.WriteByte(c)
		default:
			r, n := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && n == 1 {
				b.WriteString(`\ufffd`)
			} else {
				b.WriteString(s[i : i+n])
			}
			i += n
			continue
		}
		i++
	}
	b.WriteByte('"')
}
