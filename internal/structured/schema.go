package structured

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/pyjson"
)

// SchemaOptions tune the regular form of a JSON schema.
type SchemaOptions struct {
	NoWhitespace           bool   // disable_any_whitespace: no whitespace between tokens
	NoAdditionalProperties bool   // disable_additional_properties
	Whitespace             string // whitespace_pattern: the regex of whitespace (default [ \t\n]{0,8})
	unsupported            []string
	defs                   map[string]json.RawMessage
	set                    *RuleSet
	refCall                map[string]int    // recursive $ref → its rule
	refDone                map[string]string // expanded non-recursive $ref
	active                 map[string]bool   // $refs being expanded
	freeCall               string            // call of the any-JSON-value rule, once made
}

// UnsupportedError lists the schema features Hone cannot enforce.
type UnsupportedError struct{ Features []string }

func (e *UnsupportedError) Error() string {
	return "The provided JSON schema contains features Hone cannot enforce: " + strings.Join(e.Features, ", ")
}

// nothing is a regex that matches no text.
const nothing = `[^\x00-\x{10FFFF}]`

const (
	jsonString = `"(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})*"`
	jsonChar   = `(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})`
	jsonInt    = `-?(?:0|[1-9][0-9]{0,15})`
	jsonNumber = `-?(?:0|[1-9][0-9]{0,15})(?:\.[0-9]{1,16})?(?:[eE][+-]?[0-9]{1,2})?`
)

// formats are the string formats with a regular form (dates never generate February 29).
var formats = map[string]string{
	"date-time": `[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])`,
	"date":      `[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))`,
	"time":      `(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\.[0-9]{1,9})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])`,
	"uuid":      `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`,
	"email":     `[a-zA-Z0-9_%+-]{1,15}(?:\.[a-zA-Z0-9_%+-]{1,15}){0,3}@[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,20}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,20}[a-zA-Z0-9])?){1,6}`,
	"ipv4":      `(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])`,
	"hostname":  `[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,24}[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]{0,24}[a-zA-Z0-9])?){0,8}`,
}

// SchemaRules turns a JSON schema into the rule set of the JSON texts it accepts (objects
// keep the schema's property order, as xgrammar and outlines do): one regular expression,
// plus pushdown rules for recursive $refs and free-form values (any JSON, at any depth).
// Features Hone cannot enforce are reported together in an *UnsupportedError.
func SchemaRules(schema json.RawMessage, o SchemaOptions) (RuleSet, error) {
	set := &RuleSet{Rules: []string{""}, Names: []string{"#"}}
	re, err := schemaInto(set, schema, o)
	if err != nil {
		return RuleSet{}, err
	}
	set.Rules[0] = re
	return *set, nil
}

// schemaInto returns the regex of a schema's JSON texts (with surrounding whitespace),
// adding the pushdown rules it needs to set.
func schemaInto(set *RuleSet, schema json.RawMessage, o SchemaOptions) (string, error) {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(schema, &root); err != nil {
		var b bool
		if json.Unmarshal(schema, &b) == nil && b {
			root = map[string]json.RawMessage{}
		} else {
			return "", fmt.Errorf("the JSON schema must be an object: %w", err)
		}
	}
	o.set = set
	o.refCall, o.refDone, o.active = map[string]int{}, map[string]string{}, map[string]bool{}
	o.defs = map[string]json.RawMessage{}
	for _, k := range []string{"$defs", "definitions"} {
		var defs map[string]json.RawMessage
		if raw, ok := root[k]; ok && json.Unmarshal(raw, &defs) == nil {
			for name, d := range defs {
				o.defs["#/"+k+"/"+name] = d
			}
		}
	}
	o.defs["#"] = schema
	re := o.value(schema, "")
	if len(o.unsupported) > 0 {
		sort.Strings(o.unsupported)
		return "", &UnsupportedError{Features: dedupe(o.unsupported)}
	}
	if len(o.set.Rules) > maxRules {
		return "", &UnsupportedError{Features: []string{fmt.Sprintf("more than %d recursive $refs", maxRules-1)}}
	}
	return o.ws() + re + o.ws(), nil
}

// SchemaRegex is the regular expression of a schema without recursion or free-form values
// (an error otherwise).
func SchemaRegex(schema json.RawMessage, o SchemaOptions) (string, error) {
	rs, err := SchemaRules(schema, o)
	if err != nil {
		return "", err
	}
	if len(rs.Rules) > 1 {
		return "", fmt.Errorf("the schema is recursive or holds free-form values: it needs a pushdown automaton")
	}
	return rs.Rules[0], nil
}

// newRule adds a pushdown rule (its body set later) and returns its index.
func (o *SchemaOptions) newRule(name string) int {
	o.set.Rules = append(o.set.Rules, "")
	o.set.Names = append(o.set.Names, name)
	return len(o.set.Rules) - 1
}

func dedupe(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

func (o *SchemaOptions) ws() string {
	if o.NoWhitespace {
		return ""
	}
	if o.Whitespace != "" {
		return "(?:" + o.Whitespace + ")"
	}
	return `[ \t\n]{0,8}`
}

func (o *SchemaOptions) fail(path, feature string) string {
	if path == "" {
		path = "(root)"
	}
	o.unsupported = append(o.unsupported, fmt.Sprintf("%s at %s", feature, path))
	return `(?:)`
}

// literal is the regex of one JSON value written as Python's json.dumps would.
func literal(raw json.RawMessage) string {
	v, err := pyjson.Parse(raw)
	if err != nil {
		return regexp.QuoteMeta(string(raw))
	}
	return regexp.QuoteMeta(string(pyjson.Compact(v)))
}

func (o *SchemaOptions) value(raw json.RawMessage, path string) string {
	var s map[string]json.RawMessage
	if err := json.Unmarshal(raw, &s); err != nil {
		var b bool
		if json.Unmarshal(raw, &b) == nil {
			if b {
				return o.free()
			}
			return o.fail(path, "a false schema")
		}
		return o.fail(path, "a schema that is not an object")
	}
	for _, k := range []string{"allOf", "not", "if", "then", "else", "patternProperties", "propertyNames", "dependentSchemas", "dependentRequired", "unevaluatedProperties", "unevaluatedItems", "contains", "uniqueItems", "multipleOf", "minProperties", "maxProperties"} {
		if _, ok := s[k]; ok {
			o.fail(path, k)
		}
	}
	if ref, ok := s["$ref"]; ok {
		var r string
		json.Unmarshal(ref, &r)
		target, found := o.defs[r]
		if !found {
			return o.fail(path, "$ref "+r+" (not found)")
		}
		if k, ok := o.refCall[r]; ok {
			return callRef(k)
		}
		if o.active[r] { // recursion: the $ref becomes a rule of its own
			k := o.newRule(r)
			o.refCall[r] = k
			return callRef(k)
		}
		if re, ok := o.refDone[r]; ok {
			return re
		}
		o.active[r] = true
		re := o.value(target, path)
		o.active[r] = false
		if k, ok := o.refCall[r]; ok {
			o.set.Rules[k] = re
			return callRef(k)
		}
		o.refDone[r] = re
		return re
	}
	if c, ok := s["const"]; ok {
		return literal(c)
	}
	if e, ok := s["enum"]; ok {
		var vals []json.RawMessage
		if json.Unmarshal(e, &vals) != nil || len(vals) == 0 {
			return o.fail(path, "an enum that is not a non-empty list")
		}
		alts := make([]string, len(vals))
		for i, v := range vals {
			alts[i] = literal(v)
		}
		return "(?:" + strings.Join(alts, "|") + ")"
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if a, ok := s[k]; ok {
			var subs []json.RawMessage
			if json.Unmarshal(a, &subs) != nil || len(subs) == 0 {
				return o.fail(path, k+" that is not a non-empty list")
			}
			var alts []string
			for i, sub := range subs {
				if a := o.value(sub, fmt.Sprintf("%s/%s/%d", path, k, i)); a != nothing {
					alts = append(alts, a)
				}
			}
			if len(alts) == 0 {
				return nothing
			}
			return "(?:" + strings.Join(alts, "|") + ")"
		}
	}
	var types []string
	if t, ok := s["type"]; ok {
		var one string
		if json.Unmarshal(t, &one) == nil {
			types = []string{one}
		} else if json.Unmarshal(t, &types) != nil {
			return o.fail(path, "a type that is neither a string nor a list")
		}
	} else {
		switch {
		case s["properties"] != nil || s["additionalProperties"] != nil || s["required"] != nil:
			types = []string{"object"}
		case s["items"] != nil || s["prefixItems"] != nil:
			types = []string{"array"}
		default:
			return o.free()
		}
	}
	alts := make([]string, 0, len(types))
	for _, t := range types {
		alts = append(alts, o.typed(t, s, path))
	}
	if len(alts) == 1 {
		return alts[0]
	}
	return "(?:" + strings.Join(alts, "|") + ")"
}

func getInt(s map[string]json.RawMessage, k string) (int, bool) {
	raw, ok := s[k]
	if !ok {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		return 0, false
	}
	return int(f), true
}

func (o *SchemaOptions) typed(t string, s map[string]json.RawMessage, path string) string {
	switch t {
	case "null":
		return "null"
	case "boolean":
		return "(?:true|false)"
	case "string":
		if f, ok := s["format"]; ok {
			// A format is a fixed regex: a pattern or a length next to it cannot be enforced
			// too (as a pattern with a length), so it is refused rather than ignored.
			for _, k := range []string{"pattern", "minLength", "maxLength"} {
				if _, has := s[k]; has {
					return o.fail(path, "format with "+k)
				}
			}
			var name string
			json.Unmarshal(f, &name)
			re, known := formats[name]
			if !known {
				return o.fail(path, "string format "+strconv.Quote(name))
			}
			return `"` + re + `"`
		}
		if p, ok := s["pattern"]; ok {
			var pat string
			json.Unmarshal(p, &pat)
			if _, hasMin := s["minLength"]; hasMin {
				return o.fail(path, "pattern with minLength")
			}
			if _, hasMax := s["maxLength"]; hasMax {
				return o.fail(path, "pattern with maxLength")
			}
			pat = strings.TrimSuffix(strings.TrimPrefix(pat, "^"), "$")
			if _, err := regexp.Compile(pat); err != nil {
				return o.fail(path, "pattern "+strconv.Quote(pat)+" (not a valid regex)")
			}
			// The pattern constrains the characters; quotes and backslashes inside it are
			// taken as written.
			return `"(?:` + pat + `)"`
		}
		lo, hasLo := getInt(s, "minLength")
		hi, hasHi := getInt(s, "maxLength")
		if !hasLo && !hasHi {
			return jsonString
		}
		if !hasHi {
			return `"` + jsonChar + `{` + strconv.Itoa(lo) + `,}"`
		}
		return `"` + jsonChar + `{` + strconv.Itoa(lo) + `,` + strconv.Itoa(hi) + `}"`
	case "integer":
		lo, hasLo := getNum(s, "minimum")
		hi, hasHi := getNum(s, "maximum")
		if v, ok := getNum(s, "exclusiveMinimum"); ok {
			lo, hasLo = v+1, true
		}
		if v, ok := getNum(s, "exclusiveMaximum"); ok {
			hi, hasHi = v-1, true
		}
		switch {
		case hasLo && hasHi && hi-lo <= 2000 && lo <= hi:
			alts := make([]string, 0, int(hi-lo)+1)
			for v := int(lo); v <= int(hi); v++ {
				alts = append(alts, strconv.Itoa(v))
			}
			return "(?:" + strings.Join(alts, "|") + ")"
		case hasLo && lo >= 0 && !hasHi:
			if lo == 0 {
				return `(?:0|[1-9][0-9]{0,15})`
			}
			if lo == 1 {
				return `[1-9][0-9]{0,15}`
			}
			return o.fail(path, "integer minimum other than 0 or 1 without a maximum")
		case hasLo || hasHi:
			return o.fail(path, "integer bounds without a regular form (give both, at most 2000 apart)")
		}
		return jsonInt
	case "number":
		for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if _, ok := s[k]; ok {
				if v, _ := getNum(s, "minimum"); k == "minimum" && v == 0 {
					continue
				}
				return o.fail(path, "number "+k)
			}
		}
		if v, ok := getNum(s, "minimum"); ok && v == 0 {
			return `(?:0|[1-9][0-9]{0,15})(?:\.[0-9]{1,16})?(?:[eE][+-]?[0-9]{1,2})?`
		}
		return jsonNumber
	case "array":
		return o.array(s, path)
	case "object":
		return o.object(s, path)
	}
	return o.fail(path, "type "+strconv.Quote(t))
}

func getNum(s map[string]json.RawMessage, k string) (float64, bool) {
	raw, ok := s[k]
	if !ok {
		return 0, false
	}
	var f float64
	if json.Unmarshal(raw, &f) != nil {
		return 0, false
	}
	return f, true
}

func (o *SchemaOptions) array(s map[string]json.RawMessage, path string) string {
	ws := o.ws()
	sep := ws + "," + ws
	var prefix []string
	if p, ok := s["prefixItems"]; ok {
		var subs []json.RawMessage
		json.Unmarshal(p, &subs)
		for i, sub := range subs {
			prefix = append(prefix, o.value(sub, fmt.Sprintf("%s/prefixItems/%d", path, i)))
		}
	}
	item := ""
	if it, ok := s["items"]; ok && string(it) != "false" {
		item = o.value(it, path+"/items")
	} else if !ok && len(prefix) == 0 {
		item = o.free()
	}
	for _, p := range prefix {
		if p == nothing {
			return nothing
		}
	}
	if item == nothing {
		lo, _ := getInt(s, "minItems")
		if lo > 0 && len(prefix) == 0 {
			return nothing
		}
		item = ""
		if len(prefix) == 0 {
			return `\[` + ws + `\]`
		}
	}
	lo, _ := getInt(s, "minItems")
	hi, hasHi := getInt(s, "maxItems")
	if len(prefix) > 0 {
		body := strings.Join(prefix, sep)
		if item != "" {
			body += "(?:" + sep + item + ")*"
		}
		return `\[` + ws + body + ws + `\]`
	}
	if hasHi && hi == 0 {
		return `\[` + ws + `\]`
	}
	rest := "*"
	switch {
	case hasHi:
		rest = fmt.Sprintf("{%d,%d}", max(lo-1, 0), hi-1)
	case lo > 1:
		rest = fmt.Sprintf("{%d,}", lo-1)
	}
	body := item + "(?:" + sep + item + ")" + rest
	if lo == 0 {
		body = "(?:" + body + ")?"
	}
	return `\[` + ws + body + ws + `\]`
}

func (o *SchemaOptions) object(s map[string]json.RawMessage, path string) string {
	ws := o.ws()
	sep := ws + "," + ws
	// Properties in the schema's order.
	var names []string
	props := map[string]json.RawMessage{}
	if p, ok := s["properties"]; ok {
		v, err := pyjson.Parse(p)
		if err != nil || v.Kind != pyjson.Object {
			return o.fail(path, "properties that are not an object")
		}
		for _, m := range v.Obj {
			names = append(names, m.Key)
			props[m.Key] = json.RawMessage(pyjson.Compact(m.Val))
		}
	}
	required := map[string]bool{}
	if r, ok := s["required"]; ok {
		var rs []string
		json.Unmarshal(r, &rs)
		for _, n := range rs {
			required[n] = true
		}
	}
	var parts []string
	var kept []string
	for _, n := range names {
		key, _ := json.Marshal(n)
		val := o.value(props[n], path+"/properties/"+n)
		if val == nothing { // cut at the recursion limit
			if required[n] {
				return nothing
			}
			continue
		}
		parts = append(parts, regexp.QuoteMeta(string(key))+ws+":"+ws+val)
		kept = append(kept, n)
	}
	names = kept
	// Extra properties: additionalProperties true or a schema, unless disabled.
	extra := ""
	if ap, ok := s["additionalProperties"]; ok && !o.NoAdditionalProperties && string(ap) != "false" {
		val := o.free()
		if string(ap) != "true" {
			val = o.value(ap, path+"/additionalProperties")
		}
		extra = keyNotIn(names) + ws + ":" + ws + val
	} else if !ok && len(names) == 0 && !o.NoAdditionalProperties {
		extra = keyNotIn(names) + ws + ":" + ws + o.free() // {"type": "object"}: any object
	}
	// A sequence of properties where required ones must appear, optional ones may: the first
	// present property is any k whose predecessors are all optional.
	var alts []string
	for k := range parts {
		seq := parts[k]
		for j := k + 1; j < len(parts); j++ {
			if required[names[j]] {
				seq += sep + parts[j]
			} else {
				seq += "(?:" + sep + parts[j] + ")?"
			}
		}
		if extra != "" {
			seq += "(?:" + sep + extra + ")*"
		}
		alts = append(alts, seq)
		if required[names[k]] {
			break
		}
	}
	allOptional := true
	for _, n := range names {
		if required[n] {
			allOptional = false
		}
	}
	for n := range required {
		if _, ok := props[n]; !ok {
			return o.fail(path, "required property "+strconv.Quote(n)+" without a schema in properties")
		}
	}
	body := ""
	if len(alts) > 0 {
		body = "(?:" + strings.Join(alts, "|") + ")"
	}
	if allOptional {
		if extra != "" {
			if body != "" {
				body = "(?:" + body + "|" + extra + "(?:" + sep + extra + ")*)"
			} else {
				body = extra + "(?:" + sep + extra + ")*"
			}
		}
		if body != "" {
			body = "(?:" + body + ")?"
		}
	}
	return `\{` + ws + body + ws + `\}`
}

// free is any JSON value, at any depth: a call of a recursive rule made once.
func (o *SchemaOptions) free() string {
	if o.freeCall != "" {
		return o.freeCall
	}
	k := o.newRule("any JSON value")
	o.freeCall = callRef(k)
	ws := o.ws()
	sep := ws + "," + ws
	v := o.freeCall
	scalar := jsonString + `|` + jsonNumber + `|true|false|null`
	arr := `\[` + ws + `(?:` + v + `(?:` + sep + v + `)*)?` + ws + `\]`
	obj := `\{` + ws + `(?:` + jsonString + ws + `:` + ws + v + `(?:` + sep + jsonString + ws + `:` + ws + v + `)*)?` + ws + `\}`
	o.set.Rules[k] = `(?:` + scalar + `|` + arr + `|` + obj + `)`
	return o.freeCall
}

// keySymbol is the one way an additional property's key may write character r: the
// character itself, or its short escape, or \u00XX for other control characters (so that
// distinct texts decode to distinct keys: no `\/`, no \u escape of printable characters).
func keySymbol(r rune) string {
	switch r {
	case '"':
		return `\\"`
	case '\\':
		return `\\\\`
	case '\b':
		return `\\b`
	case '\f':
		return `\\f`
	case '\n':
		return `\\n`
	case '\r':
		return `\\r`
	case '\t':
		return `\\t`
	}
	if r < 0x20 {
		return fmt.Sprintf(`\\u00%02[1]x`, r)
	}
	return regexp.QuoteMeta(string(r))
}

// keyChar is any character of an additional property's key, written as keySymbol does
// (\u escapes in either case for control characters other than the short ones).
const keyChar = `(?:[^"\\\x00-\x1f]|\\["\\bfnrt]|\\u00[01][0-9a-fA-F])`

// keyNotIn is the regex of a quoted key that decodes to none of names (additional
// properties may not repeat a declared property): the complement of a trie of the names.
func keyNotIn(names []string) string {
	if len(names) == 0 {
		return `"` + keyChar + `*"`
	}
	type node struct {
		kids  map[rune]*node
		order []rune
		end   bool
	}
	root := &node{kids: map[rune]*node{}}
	for _, n := range names {
		cur := root
		for _, r := range n {
			k, ok := cur.kids[r]
			if !ok {
				k = &node{kids: map[rune]*node{}}
				cur.kids[r] = k
				cur.order = append(cur.order, r)
			}
			cur = k
		}
		cur.end = true
	}
	var walk func(n *node) string
	walk = func(n *node) string {
		var alts []string
		if !n.end {
			alts = append(alts, "")
		}
		// A character other than the children's, then anything.
		var lits []string
		var escs []string
		for _, r := range n.order {
			switch {
			case r < 0x20 || r == '"' || r == '\\':
				escs = append(escs, keySymbol(r))
			case strings.ContainsRune(`\\]^-[`, r):
				lits = append(lits, "\\"+string(r))
			default:
				lits = append(lits, string(r))
			}
		}
		other := `[^"\\\x00-\x1f` + strings.Join(lits, "") + `]`
		if len(escs) == 0 {
			other = "(?:" + other + `|\\["\\bfnrt]|\\u00[01][0-9a-fA-F])`
		} else {
			// Escapes other than the children's: all escapes minus those (few; list them).
			var rest []string
			for r := rune(0); r < 0x20; r++ {
				rest = append(rest, keySymbol(r))
			}
			rest = append(rest, keySymbol('"'), keySymbol('\\'))
			var keep []string
			for _, e := range rest {
				if !slices.Contains(escs, e) {
					keep = append(keep, e)
				}
			}
			other = "(?:" + other + "|" + strings.Join(keep, "|") + ")"
		}
		alts = append(alts, other+keyChar+"*")
		for _, r := range n.order {
			alts = append(alts, keySymbol(r)+walk(n.kids[r]))
		}
		return "(?:" + strings.Join(alts, "|") + ")"
	}
	return `"` + walk(root) + `"`
}
