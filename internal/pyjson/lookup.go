package pyjson

import (
	"bytes"
	"errors"
)

// ErrLookupEscaped is Lookup's answer when a key on the way holds an escape sequence: the
// caller decides with a full parse.
var ErrLookupEscaped = errors.New("pyjson: an escaped key on the lookup path")

// Lookup returns the text of the value at path in the JSON document data, without building
// anything: each step is an object member named by the segment, or, where index[i] is true,
// the element at that position of an array (path[i] its decimal digits), as SQLite's
// json_extract reads `$."name"` and `$[N]`. found is false when a step does not exist (a
// member missing, an index past the end, a step into a scalar or into the wrong kind of
// container). A member named twice is found at its first occurrence. Members whose keys hold
// escape sequences cannot be compared by their text: ErrLookupEscaped then. The document must
// be valid JSON as Parse reads it (Lookup checks only what it walks over).
func Lookup(data []byte, path []string, index []bool) (raw []byte, found bool, err error) {
	p := &parser{s: data}
	p.ws()
	for k, seg := range path {
		if p.i >= len(p.s) {
			return nil, false, p.err("unexpected end of input")
		}
		c := p.s[p.i]
		if index[k] != (c == '[') || c != '[' && c != '{' {
			return nil, false, nil
		}
		p.i++
		p.ws()
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		if p.i < len(p.s) && p.s[p.i] == closer {
			return nil, false, nil
		}
		want := 0
		if index[k] {
			for _, d := range []byte(seg) {
				want = want*10 + int(d-'0')
			}
		}
		for n := 0; ; n++ {
			p.ws()
			match := index[k] && n == want
			if !index[k] {
				if p.i >= len(p.s) || p.s[p.i] != '"' {
					return nil, false, p.err("expected a string key")
				}
				start := p.i
				j, ok := skipStringFast(p.s, p.i)
				if !ok {
					if _, err := p.str(); err != nil {
						return nil, false, err
					}
					j = p.i
				}
				key := p.s[start+1 : j-1]
				if bytes.IndexByte(key, '\\') >= 0 {
					return nil, false, ErrLookupEscaped
				}
				match = string(key) == seg
				p.i = skipWS(p.s, j)
				if p.i >= len(p.s) || p.s[p.i] != ':' {
					return nil, false, p.err("expected ':'")
				}
				p.i++
				p.ws()
			}
			if match {
				break
			}
			if err := p.skip(k + 1); err != nil {
				return nil, false, err
			}
			p.ws()
			if p.i >= len(p.s) {
				return nil, false, p.err("unexpected end of input")
			}
			if p.s[p.i] == closer {
				return nil, false, nil
			}
			if p.s[p.i] != ',' {
				return nil, false, p.err("expected ',' or a closing bracket")
			}
			p.i++
		}
	}
	start := p.i
	if err := p.skip(len(path)); err != nil {
		return nil, false, err
	}
	return p.s[start:p.i], true, nil
}
