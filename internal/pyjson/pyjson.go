// Package pyjson parses JSON into an order-preserving tree and writes it back the way Python
// writes it: `Dumps` produces exactly the text of Python's `json.dumps(json.loads(text))` with
// the default arguments (separators ", " and ": ", ensure_ascii, keys in arrival order, floats
// printed with Python's repr, integers of any size). Weave digests are SHA-256 of that text, so
// byte-exactness matters.
//
// Strings are kept as WTF-8: a lone UTF-16 surrogate escaped in the input (`"\ud800"`) survives
// the round trip, as it does in Python. Duplicate keys keep the first key's position and the
// last value, as a Python dict does.
package pyjson

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is the JSON type of a Value.
type Kind uint8

// Kinds of values.
const (
	Null Kind = iota
	Bool
	Int   // an integer literal (no fraction, no exponent): Python int
	Float // a number with a fraction or an exponent: Python float
	String
	Array
	Object
	// Raw is an array or object left unparsed by ParseShallow; Str holds its JSON text.
	Raw
)

// Value is a parsed JSON value.
type Value struct {
	Kind Kind
	// Str is the string (WTF-8) for String, and the literal text for Int and Float.
	Str  string
	Bool bool
	Arr  []Value
	Obj  []Member
}

// Member is one key of an object.
type Member struct {
	Key string
	Val Value
}

// MaxDepth is the deepest nesting Parse accepts.
const MaxDepth = 256

// ErrTooDeep is returned for values nested deeper than MaxDepth.
var ErrTooDeep = fmt.Errorf("value nested deeper than %d levels", MaxDepth)

// SyntaxError is a parse error at a byte offset.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.Msg, e.Offset) }

type parser struct {
	s       []byte
	i       int
	buf     []byte
	shallow int // > 0: containers deeper than this become Raw
	// members and elems hold the members and elements of the objects and arrays being parsed
	// (nested ones above their parents'); each is copied out once complete, sized exactly.
	members []Member
	elems   []Value
	keys    map[string]string // short keys seen in a large document, shared instead of copied
	// high-water marks of members and elems, cleared before the parser is reused
	membersHW, elemsHW int
}

var parsers = sync.Pool{New: func() any { return new(parser) }}

// getParser returns a parser of data from the pool (its stacks keep their capacity).
func getParser(data []byte, shallow int) *parser {
	p := parsers.Get().(*parser)
	p.s, p.i, p.shallow = data, 0, shallow
	return p
}

// putParser returns p to the pool, dropping what could keep parsed values alive.
func putParser(p *parser) {
	if cap(p.members) > 4096 || cap(p.elems) > 4096 {
		return
	}
	clear(p.members[:p.membersHW])
	clear(p.elems[:p.elemsHW])
	p.members, p.elems, p.membersHW, p.elemsHW = p.members[:0], p.elems[:0], 0, 0
	p.s, p.keys, p.buf = nil, nil, p.buf[:0]
	parsers.Put(p)
}

// Parse parses one JSON value (RFC 8259; surrounding whitespace allowed).
func Parse(data []byte) (Value, error) {
	p := getParser(data, 0)
	defer putParser(p)
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.ws()
	if p.i != len(p.s) {
		return Value{}, p.err("unexpected data after the value")
	}
	return v, nil
}

func (p *parser) err(msg string) error { return &SyntaxError{Offset: p.i, Msg: msg} }

func (p *parser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *parser) lit(word string, v Value) (Value, error) {
	if len(p.s)-p.i >= len(word) && string(p.s[p.i:p.i+len(word)]) == word {
		p.i += len(word)
		return v, nil
	}
	return Value{}, p.err("invalid literal")
}

func (p *parser) value(depth int) (Value, error) {
	if depth > MaxDepth {
		return Value{}, ErrTooDeep
	}
	if p.i >= len(p.s) {
		return Value{}, p.err("unexpected end of input")
	}
	switch c := p.s[p.i]; {
	case (c == '{' || c == '[') && p.shallow > 0 && depth > p.shallow:
		start := p.i
		if err := p.skip(depth); err != nil {
			return Value{}, err
		}
		return Value{Kind: Raw, Str: string(p.s[start:p.i])}, nil
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		return Value{Kind: String, Str: s}, err
	case c == 't':
		return p.lit("true", Value{Kind: Bool, Bool: true})
	case c == 'f':
		return p.lit("false", Value{Kind: Bool})
	case c == 'n':
		return p.lit("null", Value{Kind: Null})
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	}
	return Value{}, p.err("invalid character")
}

func (p *parser) object(depth int) (Value, error) {
	p.i++ // {
	v := Value{Kind: Object}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return v, nil
	}
	base := len(p.members)
	defer func() { p.members = p.members[:base] }()
	var index map[string]int // built only for objects with many keys: key -> offset from base
	for {
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return Value{}, p.err("expected a string key")
		}
		k, err := p.key()
		if err != nil {
			return Value{}, err
		}
		p.ws()
		if p.i >= len(p.s) || p.s[p.i] != ':' {
			return Value{}, p.err("expected ':'")
		}
		p.i++
		p.ws()
		val, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		// A repeated key keeps its first position and takes the new value (Python dict).
		obj := p.members[base:]
		dup := -1
		if index != nil {
			if j, ok := index[k]; ok {
				dup = j
			}
		} else {
			for j := range obj {
				if obj[j].Key == k {
					dup = j
					break
				}
			}
		}
		if dup >= 0 {
			obj[dup].Val = val
		} else {
			p.members = append(p.members, Member{Key: k, Val: val})
			p.membersHW = max(p.membersHW, len(p.members))
			if n := len(p.members) - base; index == nil && n > 16 {
				index = make(map[string]int, n*2)
				for j, m := range p.members[base:] {
					index[m.Key] = j
				}
			} else if index != nil {
				index[k] = n - 1
			}
		}
		p.ws()
		if p.i >= len(p.s) {
			return Value{}, p.err("unexpected end of input in object")
		}
		if p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.s[p.i] == '}' {
			p.i++
			v.Obj = append([]Member(nil), p.members[base:]...)
			return v, nil
		}
		return Value{}, p.err("expected ',' or '}'")
	}
}

func (p *parser) array(depth int) (Value, error) {
	p.i++ // [
	v := Value{Kind: Array, Arr: []Value{}}
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return v, nil
	}
	base := len(p.elems)
	defer func() { p.elems = p.elems[:base] }()
	for {
		p.ws()
		el, err := p.value(depth + 1)
		if err != nil {
			return Value{}, err
		}
		p.elems = append(p.elems, el)
		p.elemsHW = max(p.elemsHW, len(p.elems))
		p.ws()
		if p.i >= len(p.s) {
			return Value{}, p.err("unexpected end of input in array")
		}
		if p.s[p.i] == ',' {
			p.i++
			continue
		}
		if p.s[p.i] == ']' {
			p.i++
			v.Arr = append(make([]Value, 0, len(p.elems)-base), p.elems[base:]...)
			return v, nil
		}
		return Value{}, p.err("expected ',' or ']'")
	}
}

// key parses an object key; in a large document, short keys without escapes are shared (the
// same keys repeat in every element of an array of objects).
func (p *parser) key() (string, error) {
	if len(p.s) < 8192 {
		return p.str()
	}
	start := p.i + 1
	end := start
	for end < len(p.s) && end-start <= 32 {
		c := p.s[end]
		if c == '"' {
			raw := p.s[start:end]
			if k, ok := p.keys[string(raw)]; ok {
				p.i = end + 1
				return k, nil
			}
			k, err := p.str()
			if err == nil {
				if p.keys == nil {
					p.keys = make(map[string]string)
				}
				if len(p.keys) < 1024 {
					p.keys[k] = k
				}
			}
			return k, err
		}
		if c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			break
		}
		end++
	}
	return p.str()
}

func (p *parser) number() (Value, error) {
	start := p.i
	isFloat := false
	if p.s[p.i] == '-' {
		p.i++
	}
	digits := func() int {
		n := 0
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			p.i++
			n++
		}
		return n
	}
	if p.i < len(p.s) && p.s[p.i] == '0' {
		p.i++
	} else if digits() == 0 {
		return Value{}, p.err("invalid number")
	}
	if p.i < len(p.s) && p.s[p.i] == '.' {
		isFloat = true
		p.i++
		if digits() == 0 {
			return Value{}, p.err("invalid number: digits expected after '.'")
		}
	}
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		isFloat = true
		p.i++
		if p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
			p.i++
		}
		if digits() == 0 {
			return Value{}, p.err("invalid number: digits expected in exponent")
		}
	}
	k := Int
	if isFloat {
		k = Float
	}
	return Value{Kind: k, Str: string(p.s[start:p.i])}, nil
}

func hexVal(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10
	}
	return -1
}

func (p *parser) hex4() (rune, error) {
	if len(p.s)-p.i < 4 {
		return 0, p.err("truncated \\u escape")
	}
	var r rune
	for k := 0; k < 4; k++ {
		h := hexVal(p.s[p.i+k])
		if h < 0 {
			return 0, p.err("invalid \\u escape")
		}
		r = r<<4 | h
	}
	p.i += 4
	return r, nil
}

// appendWTF8 appends r, encoding lone surrogates as 3-byte sequences (WTF-8).
func appendWTF8(b []byte, r rune) []byte {
	if r >= 0xD800 && r <= 0xDFFF {
		return append(b, byte(0xE0|r>>12), byte(0x80|(r>>6)&0x3F), byte(0x80|r&0x3F))
	}
	return utf8.AppendRune(b, r)
}

func (p *parser) str() (string, error) {
	p.i++ // opening quote
	start := p.i
	// Fast path: no escapes, valid UTF-8, no control characters.
	for p.i < len(p.s) {
		c := p.s[p.i]
		if c == '"' {
			s := p.s[start:p.i]
			p.i++
			if utf8.Valid(s) {
				return string(s), nil
			}
			p.i = start
			break
		}
		if c == '\\' || c < 0x20 {
			p.i = start
			break
		}
		p.i++
	}
	if p.i != start || p.i >= len(p.s) {
		return "", p.err("unterminated string")
	}
	b := p.buf[:0]
	for {
		if p.i >= len(p.s) {
			return "", p.err("unterminated string")
		}
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			p.buf = b
			return string(b), nil
		case c < 0x20:
			return "", p.err("control character in string")
		case c == '\\':
			p.i++
			if p.i >= len(p.s) {
				return "", p.err("unterminated escape")
			}
			e := p.s[p.i]
			p.i++
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) && r < 0xDC00 && len(p.s)-p.i >= 6 && p.s[p.i] == '\\' && p.s[p.i+1] == 'u' {
					save := p.i
					p.i += 2
					r2, err := p.hex4()
					if err == nil && r2 >= 0xDC00 && r2 <= 0xDFFF {
						b = utf8.AppendRune(b, utf16.DecodeRune(r, r2))
						continue
					}
					p.i = save
				}
				b = appendWTF8(b, r)
			default:
				return "", p.err("invalid escape")
			}
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.s[p.i:])
			if r == utf8.RuneError && size == 1 {
				return "", p.err("invalid UTF-8 in string")
			}
			b = append(b, p.s[p.i:p.i+size]...)
			p.i += size
		}
	}
}

// Dumps returns Python's json.dumps text of v (default arguments).
func Dumps(v Value) []byte { return AppendDumps(nil, v) }

// AppendDumps appends Dumps(v) to b.
func AppendDumps(b []byte, v Value) []byte {
	switch v.Kind {
	case Null:
		return append(b, "null"...)
	case Bool:
		if v.Bool {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case Int:
		return appendPyInt(b, v.Str)
	case Float:
		f, err := strconv.ParseFloat(v.Str, 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return append(b, "NaN"...)
		}
		return AppendFloatRepr(b, f)
	case String:
		return AppendPyString(b, v.Str)
	case Array:
		b = append(b, '[')
		for i, el := range v.Arr {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = AppendDumps(b, el)
		}
		return append(b, ']')
	case Raw:
		full, err := Parse([]byte(v.Str))
		if err != nil {
			return append(b, "null"...)
		}
		return AppendDumps(b, full)
	case Object:
		b = append(b, '{')
		for i, m := range v.Obj {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = AppendPyString(b, m.Key)
			b = append(b, ": "...)
			b = AppendDumps(b, m.Val)
		}
		return append(b, '}')
	}
	return b
}

// appendPyInt writes an integer literal as Python's int() then str() would: "-0" is "0".
func appendPyInt(b []byte, lit string) []byte {
	neg := strings.HasPrefix(lit, "-")
	digits := strings.TrimPrefix(lit, "-")
	if strings.Trim(digits, "0") == "" {
		return append(b, '0')
	}
	if neg {
		b = append(b, '-')
	}
	return append(b, digits...)
}

// AppendFloatRepr appends Python's repr of f as json.dumps prints it (Infinity, -Infinity, NaN
// for the non-finite values).
func AppendFloatRepr(b []byte, f float64) []byte {
	switch {
	case f != f:
		return append(b, "NaN"...)
	case f > 1.7976931348623157e308:
		return append(b, "Infinity"...)
	case f < -1.7976931348623157e308:
		return append(b, "-Infinity"...)
	}
	// Shortest round-trip digits and decimal exponent, then Python's layout: positional
	// notation when -4 <= exp < 16, scientific otherwise.
	sci := strconv.AppendFloat(nil, f, 'e', -1, 64) // like -1.2345e+06
	neg := sci[0] == '-'
	if neg {
		sci = sci[1:]
	}
	ePos := 0
	for sci[ePos] != 'e' {
		ePos++
	}
	mant := sci[:ePos]
	exp, _ := strconv.Atoi(string(sci[ePos+1:]))
	digits := make([]byte, 0, len(mant))
	for _, c := range mant {
		if c != '.' {
			digits = append(digits, c)
		}
	}
	if neg {
		b = append(b, '-')
	}
	if exp >= -4 && exp < 16 {
		if exp < 0 {
			b = append(b, "0."...)
			for i := 0; i < -exp-1; i++ {
				b = append(b, '0')
			}
			return append(b, digits...)
		}
		intLen := exp + 1
		if len(digits) <= intLen {
			b = append(b, digits...)
			for i := len(digits); i < intLen; i++ {
				b = append(b, '0')
			}
			return append(b, ".0"...)
		}
		b = append(b, digits[:intLen]...)
		b = append(b, '.')
		return append(b, digits[intLen:]...)
	}
	b = append(b, digits[0])
	if len(digits) > 1 {
		b = append(b, '.')
		b = append(b, digits[1:]...)
	}
	b = append(b, 'e')
	if exp < 0 {
		b = append(b, '-')
		exp = -exp
	} else {
		b = append(b, '+')
	}
	if exp < 10 {
		b = append(b, '0')
	}
	return strconv.AppendInt(b, int64(exp), 10)
}

const hexDigits = "0123456789abcdef"

// AppendPyString appends s as json.dumps writes a str with ensure_ascii: `"` and `\` escaped,
// \n \r \t \b \f, every other character outside ' '..'~' as \uXXXX (surrogate pairs above U+FFFF).
func AppendPyString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				b = append(b, '\\', '"')
			case c == '\\':
				b = append(b, '\\', '\\')
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c == '\b':
				b = append(b, '\\', 'b')
			case c == '\f':
				b = append(b, '\\', 'f')
			case c < 0x20 || c == 0x7f:
				b = appendU(b, rune(c))
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := decodeWTF8(s[i:])
		i += size
		if r > 0xFFFF {
			r1, r2 := utf16.EncodeRune(r)
			b = appendU(b, r1)
			b = appendU(b, r2)
		} else {
			b = appendU(b, r)
		}
	}
	return append(b, '"')
}

func appendU(b []byte, r rune) []byte {
	return append(b, '\\', 'u', hexDigits[r>>12&0xF], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
}

// decodeWTF8 decodes one rune, accepting encoded surrogates; invalid bytes decode as U+FFFD.
func decodeWTF8(s string) (rune, int) {
	if len(s) >= 3 && s[0] == 0xED && s[1] >= 0xA0 && s[1] <= 0xBF && s[2]&0xC0 == 0x80 {
		return rune(s[0]&0x0F)<<12 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), 3
	}
	return utf8.DecodeRuneInString(s)
}

// AppendCompact appends v as compact standard JSON (no spaces, UTF-8 kept, number literals as
// received). Lone surrogates are written as \uXXXX escapes so the text stays valid JSON.
func AppendCompact(b []byte, v Value) []byte {
	switch v.Kind {
	case Null:
		return append(b, "null"...)
	case Bool:
		if v.Bool {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case Int, Float:
		return append(b, v.Str...)
	case Raw:
		return AppendCompactText(b, v.Str)
	case String:
		return appendJSONString(b, v.Str)
	case Array:
		b = append(b, '[')
		for i, el := range v.Arr {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendCompact(b, el)
		}
		return append(b, ']')
	case Object:
		b = append(b, '{')
		for i, m := range v.Obj {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, m.Key)
			b = append(b, ':')
			b = AppendCompact(b, m.Val)
		}
		return append(b, '}')
	}
	return b
}

// AppendCompactText appends the valid JSON text s without its insignificant whitespace (what
// encoding/json.Compact does, in one pass with no scanner state machine): whitespace is dropped
// outside strings, everything else is copied as is.
func AppendCompactText[T string | []byte](b []byte, s T) []byte {
	ws := firstInsignificantSpace(s)
	if ws < 0 {
		return append(b, s...)
	}
	b = append(b, s[:ws]...)
	inStr := false
	for i := ws; i < len(s); i++ {
		c := s[i]
		switch {
		case inStr:
			if c == '\\' {
				b = append(b, c, s[i+1])
				i++
				continue
			}
			if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		}
		b = append(b, c)
	}
	return b
}

// CompactText returns valid JSON text without insignificant whitespace: data itself (not a
// copy) when it has none.
func CompactText(data []byte) []byte {
	if firstInsignificantSpace(data) < 0 {
		return data
	}
	return AppendCompactText(make([]byte, 0, len(data)), data)
}

// firstInsignificantSpace is the offset of the first whitespace outside strings in the valid
// JSON text s, or -1.
func firstInsignificantSpace[T string | []byte](s T) int {
	inStr := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inStr {
			if c == '\\' {
				i++
			} else if c == '"' {
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case ' ', '\t', '\n', '\r':
			return i
		}
	}
	return -1
}

// Compact returns AppendCompact(nil, v).
func Compact(v Value) []byte { return AppendCompact(nil, v) }

func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"':
				b = append(b, '\\', '"')
			case c == '\\':
				b = append(b, '\\', '\\')
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = appendU(b, rune(c))
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := decodeWTF8(s[i:])
		if r >= 0xD800 && r <= 0xDFFF {
			b = appendU(b, r)
		} else {
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// Get returns the member key of an object value.
func (v Value) Get(key string) (Value, bool) {
	if v.Kind != Object {
		return Value{}, false
	}
	for _, m := range v.Obj {
		if m.Key == key {
			return m.Val, true
		}
	}
	return Value{}, false
}

// Path follows keys through nested objects.
func (v Value) Path(keys ...string) (Value, bool) {
	cur := v
	for _, k := range keys {
		next, ok := cur.Get(k)
		if !ok {
			return Value{}, false
		}
		cur = next
	}
	return cur, true
}

// String returns the string of a String value ("" otherwise).
func (v Value) String() string {
	if v.Kind == String {
		return v.Str
	}
	return ""
}

// TopLevelKeys returns the keys of a JSON object without building its values (they are only
// scanned), for checking a request's fields cheaply. It fails when data is not one valid JSON
// object.
func TopLevelKeys(data []byte) ([]string, error) {
	p := &parser{s: data}
	p.ws()
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return nil, p.err("expected a JSON object")
	}
	p.i++
	var keys []string
	p.ws()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
	} else {
		for {
			p.ws()
			if p.i >= len(p.s) || p.s[p.i] != '"' {
				return nil, p.err("expected a string key")
			}
			k, err := p.str()
			if err != nil {
				return nil, err
			}
			keys = append(keys, k)
			p.ws()
			if p.i >= len(p.s) || p.s[p.i] != ':' {
				return nil, p.err("expected ':'")
			}
			p.i++
			p.ws()
			if err := p.skip(0); err != nil {
				return nil, err
			}
			p.ws()
			if p.i < len(p.s) && p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.i < len(p.s) && p.s[p.i] == '}' {
				p.i++
				break
			}
			return nil, p.err("expected ',' or '}'")
		}
	}
	p.ws()
	if p.i != len(p.s) {
		return nil, p.err("unexpected data after the value")
	}
	return keys, nil
}

// skip scans one value without building it. It gives the results and the errors (messages
// and offsets) of the recursive scan it replaced (kept in skipref_test.go as refSkip), which
// scanned strings byte by byte and scalars with value: containers are walked with an explicit
// stack, strings a word at a time, and numbers and literals in place (no allocation).
func (p *parser) skip(depth int) error {
	s, i := p.s, p.i
	// objs has bit n set when the container opened n levels below the value skipped is an
	// object; n counts them. depth is the depth of the value about to be scanned.
	var objs [(MaxDepth + 2 + 63) / 64]uint64
	n := 0
	for {
		// A value at s[i] (whitespace before it skipped).
		if depth > MaxDepth {
			p.i = i
			return ErrTooDeep
		}
		if i >= len(s) {
			p.i = i
			return p.err("unexpected end of input")
		}
		switch c := s[i]; c {
		case '"':
			j, ok := skipStringFast(s, i)
			if !ok {
				p.i = i
				if _, err := p.str(); err != nil {
					return err
				}
				j = p.i
			}
			i = j
		case '{', '[':
			closer := byte('}')
			if c == '[' {
				closer = ']'
			}
			i = skipWS(s, i+1)
			if i < len(s) && s[i] == closer {
				i++
				break
			}
			if c == '{' {
				objs[n>>6] |= 1 << (n & 63)
			} else {
				objs[n>>6] &^= 1 << (n & 63)
			}
			n++
			depth++
			if c == '{' {
				var err error
				if i, err = p.skipKey(s, i); err != nil {
					return err
				}
			}
			continue
		case 't', 'f', 'n':
			w := "null"
			if c == 't' {
				w = "true"
			} else if c == 'f' {
				w = "false"
			}
			if len(s)-i < len(w) || string(s[i:i+len(w)]) != w {
				p.i = i
				return p.err("invalid literal")
			}
			i += len(w)
		default:
			if c != '-' && c-'0' > 9 {
				p.i = i
				return p.err("invalid character")
			}
			var msg string
			if i, msg = skipNumber(s, i); msg != "" {
				p.i = i
				return p.err(msg)
			}
		}
		// The value ended at i: close the containers it completes, then go to the next
		// element (or return when the value skipped is complete).
		for {
			if n == 0 {
				p.i = i
				return nil
			}
			i = skipWS(s, i)
			if i >= len(s) {
				p.i = i
				return p.err("unexpected end of input")
			}
			obj := objs[(n-1)>>6]&(1<<((n-1)&63)) != 0
			if s[i] == ',' {
				i = skipWS(s, i+1)
				if obj {
					var err error
					if i, err = p.skipKey(s, i); err != nil {
						return err
					}
				}
				break
			}
			closer := byte(']')
			if obj {
				closer = '}'
			}
			if s[i] == closer {
				i++
				n--
				depth--
				continue
			}
			p.i = i
			return p.err("expected ',' or a closing bracket")
		}
	}
}

// skipKey scans an object's key, the ':' after it and the whitespace around them, from s[i]
// (whitespace before the key already skipped); it returns where the value starts.
func (p *parser) skipKey(s []byte, i int) (int, error) {
	if i >= len(s) || s[i] != '"' {
		p.i = i
		return 0, p.err("expected a string key")
	}
	j, ok := skipStringFast(s, i)
	if !ok {
		p.i = i
		if _, err := p.str(); err != nil {
			return 0, err
		}
		j = p.i
	}
	i = skipWS(s, j)
	if i >= len(s) || s[i] != ':' {
		p.i = i
		return 0, p.err("expected ':'")
	}
	return skipWS(s, i+1), nil
}

// skipWS returns the index of the first byte at or after i that is not JSON whitespace.
func skipWS(s []byte, i int) int {
	for i < len(s) && s[i] <= ' ' && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t') {
		i++
	}
	return i
}

// skipNumber scans a number at s[i] (a '-' or a digit) as number does: it returns the index
// after it, or the offset and message of number's error.
func skipNumber(s []byte, i int) (int, string) {
	if s[i] == '-' {
		i++
	}
	if i < len(s) && s[i] == '0' {
		i++
	} else {
		j := skipDigits(s, i)
		if j == i {
			return i, "invalid number"
		}
		i = j
	}
	if i < len(s) && s[i] == '.' {
		j := skipDigits(s, i+1)
		if j == i+1 {
			return j, "invalid number: digits expected after '.'"
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := skipDigits(s, i)
		if j == i {
			return i, "invalid number: digits expected in exponent"
		}
		i = j
	}
	return i, ""
}

func skipDigits(s []byte, i int) int {
	for i < len(s) && s[i]-'0' <= 9 {
		i++
	}
	return i
}

// Bytes of a word that need a look in a string: SWAR constants.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// stringStops returns a word with the high bit set in each byte of w that is '"', '\\' or a
// control character (below 0x20). A set bit above the lowest one may be a false positive (a
// borrow); the lowest is exact.
func stringStops(w uint64) uint64 {
	q := w ^ (ones * '"')
	b := w ^ (ones * '\\')
	return ((q-ones)&^q | (b-ones)&^b | (w-ones*0x20)&^w) & highs
}

// skipStringFast scans the string that starts at s[i] (its opening quote) and returns the index
// after its closing quote, with ok. It returns ok false, and leaves the error to str, for any
// string str rejects (unterminated, a control character, a bad escape, invalid UTF-8), and
// may for others; for a string it accepts, it ends where str ends.
func skipStringFast(s []byte, i int) (end int, ok bool) {
	start := i + 1
	i = start
	var seen uint64 // OR of the words scanned: a high bit says the string may hold non-ASCII bytes
	for {
		for i+8 <= len(s) {
			w := binary.LittleEndian.Uint64(s[i:])
			seen |= w
			if m := stringStops(w); m != 0 {
				i += bits.TrailingZeros64(m) >> 3
				goto stop
			}
			i += 8
		}
		for ; i < len(s); i++ {
			c := s[i]
			seen |= uint64(c)
			if c == '"' || c == '\\' || c < 0x20 {
				goto stop
			}
		}
		return 0, false
	stop:
		switch s[i] {
		case '"':
			if seen&highs != 0 && !utf8.Valid(s[start:i]) {
				return 0, false
			}
			return i + 1, true
		case '\\':
			if i+1 >= len(s) {
				return 0, false
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if len(s)-(i+2) < 4 || hexVal(s[i+2]) < 0 || hexVal(s[i+3]) < 0 || hexVal(s[i+4]) < 0 || hexVal(s[i+5]) < 0 {
					return 0, false
				}
				i += 6
			default:
				return 0, false
			}
		default: // a control character
			return 0, false
		}
	}
}

// Check validates that data is one JSON value nested at most MaxDepth deep, without building
// it (no allocation beyond escaped strings).
func Check(data []byte) error {
	p := &parser{s: data}
	p.ws()
	if err := p.skip(0); err != nil {
		return err
	}
	p.ws()
	if p.i != len(p.s) {
		return p.err("unexpected data after the value")
	}
	return nil
}

// ParseShallowAt is ParseShallow of a value that sits at depth base of a larger document
// (the text of a Raw value of ParseShallow): depth limits and the shallow depth count from the
// top of that document, so parsing a Raw value this way gives what ParseShallow of the whole
// document would have given at its place.
func ParseShallowAt(data []byte, base, depth int) (Value, error) {
	p := getParser(data, depth)
	defer putParser(p)
	p.ws()
	v, err := p.value(base)
	if err != nil {
		return Value{}, err
	}
	p.ws()
	if p.i != len(p.s) {
		return Value{}, p.err("unexpected data after the value")
	}
	return v, nil
}

// ParseShallow parses data like Parse, but arrays and objects nested deeper than depth are
// not built: they become Raw values holding their (validated) text. Callers that only need
// the top of a large document and the raw text of its leaves avoid building the rest.
func ParseShallow(data []byte, depth int) (Value, error) {
	p := getParser(data, depth)
	defer putParser(p)
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	p.ws()
	if p.i != len(p.s) {
		return Value{}, p.err("unexpected data after the value")
	}
	return v, nil
}
