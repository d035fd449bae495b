package otlp

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"

	common "go.opentelemetry.io/proto/otlp/common/v1"
)

// value is an attribute's value as JSON: strings, booleans and numbers as they are, bytes as
// base64, arrays and key-value lists as arrays and objects. A float JSON cannot hold is the
// text "NaN", "Infinity" or "-Infinity"; a value with nothing set is null.
func value(v *common.AnyValue) any {
	if v == nil {
		return nil
	}
	switch x := v.Value.(type) {
	case *common.AnyValue_StringValue:
		return x.StringValue
	case *common.AnyValue_BoolValue:
		return x.BoolValue
	case *common.AnyValue_IntValue:
		return x.IntValue
	case *common.AnyValue_DoubleValue:
		return finite(x.DoubleValue)
	case *common.AnyValue_BytesValue:
		return base64.StdEncoding.EncodeToString(x.BytesValue)
	case *common.AnyValue_ArrayValue:
		vals := x.ArrayValue.GetValues()
		out := make([]any, len(vals))
		for i, el := range vals {
			out[i] = value(el)
		}
		return out
	case *common.AnyValue_KvlistValue:
		out := make(map[string]any, len(x.KvlistValue.GetValues()))
		for _, kv := range x.KvlistValue.GetValues() {
			out[kv.GetKey()] = value(kv.GetValue())
		}
		return out
	}
	return nil
}

func finite(f float64) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	return f
}

// attrs are a span's (or a resource's, an event's) attributes by their full dotted key, as
// sent: OTel keys are flat ("llm.input_messages.0.message.role"), and they are kept flat, so
// that no key can nest a value deeper than what was sent.
type attrs map[string]any

func attributes(kvs []*common.KeyValue) attrs {
	a := make(attrs, len(kvs))
	for _, kv := range kvs {
		a[kv.GetKey()] = value(kv.GetValue())
	}
	return a
}

// str is the attribute key as text: a string as it is, a number or boolean written out; ""
// when absent or of another kind.
func (a attrs) str(key string) string { return text(a[key]) }

func text(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	case json.Number:
		return x.String()
	}
	return ""
}

// integer reads a token count: an integer, a whole float, or a decimal string.
func integer(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1<<53 {
			return int64(x), true
		}
	case string:
		if n, err := strconv.ParseInt(strings.TrimSpace(x), 10, 64); err == nil {
			return n, true
		}
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n, true
		}
	}
	return 0, false
}

// truthy is Python's truth of an attribute value, as Weave tests wandb.is_turn.
func truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case int64:
		return x != 0
	case float64:
		return x != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// maxIndex bounds the indexes of flattened lists ("gen_ai.prompt.<i>.content").
const maxIndex = 1 << 20

// item is one element of a flattened list: its index and its keys below "<prefix>.<index>.".
type item struct {
	index int
	a     attrs
}

// indexed gathers a flattened list: the keys "<prefix>.<i>.<rest>" as items by i, each with
// its keys <rest>, in the order of i. Keys whose <i> is not a small integer are skipped.
func (a attrs) indexed(prefix string) []item {
	p := prefix + "."
	var byIndex map[int]attrs
	for k, v := range a {
		if !strings.HasPrefix(k, p) {
			continue
		}
		rest := k[len(p):]
		num, sub, _ := strings.Cut(rest, ".")
		i, err := strconv.Atoi(num)
		if err != nil || i < 0 || i > maxIndex || (len(num) > 1 && num[0] == '0') {
			continue
		}
		if byIndex == nil {
			byIndex = map[int]attrs{}
		}
		m := byIndex[i]
		if m == nil {
			m = attrs{}
			byIndex[i] = m
		}
		m[sub] = v
	}
	out := make([]item, 0, len(byIndex))
	for i, m := range byIndex {
		out = append(out, item{i, m})
	}
	sort.Slice(out, func(x, y int) bool { return out[x].index < out[y].index })
	return out
}

// under gathers the keys "<prefix>.<rest>" as <rest> (nil when there are none).
func (a attrs) under(prefix string) attrs {
	p := prefix + "."
	var out attrs
	for k, v := range a {
		if strings.HasPrefix(k, p) {
			if out == nil {
				out = attrs{}
			}
			out[k[len(p):]] = v
		}
	}
	return out
}

// hasUnder reports whether any key is prefix itself or below it.
func (a attrs) hasUnder(prefix string) bool {
	if _, ok := a[prefix]; ok {
		return true
	}
	p := prefix + "."
	for k := range a {
		if strings.HasPrefix(k, p) {
			return true
		}
	}
	return false
}

// maxEmbeddedDepth bounds the nesting of JSON found inside a string attribute that Hone
// decodes (a request body in input.value): the call's values stay within the store's bound
// (pyjson.MaxDepth) with the levels Hone adds around them.
const maxEmbeddedDepth = 200

// decodeJSONText decodes a string that holds a JSON object or array (what instrumentations
// send for structured values); anything else, or JSON too deep, comes back as it was.
func decodeJSONText(v any) any {
	s, ok := v.(string)
	if !ok {
		return v
	}
	t := strings.TrimSpace(s)
	if t == "" || (t[0] != '{' && t[0] != '[') {
		return v
	}
	if depth([]byte(t)) > maxEmbeddedDepth || !json.Valid([]byte(t)) {
		return v
	}
	dec := json.NewDecoder(strings.NewReader(t))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err != nil {
		return v
	}
	return out
}

// depth is the deepest nesting of arrays and objects in JSON text (strings skipped).
func depth(b []byte) int {
	d, most, inStr := 0, 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inStr {
			switch c {
			case '\\':
				i++
			case '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '{', '[':
			d++
			most = max(most, d)
		case '}', ']':
			d--
		}
	}
	return most
}

// compact marshals v; the values built here always marshal.
func compact(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return json.RawMessage("null")
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}
