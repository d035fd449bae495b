package pyjson

import "unicode/utf8"

// refSkip and refSkipString are skip and skipString as they were before the word-at-a-time
// scanner: the reference the differential tests hold the new scanner to (same results, same
// errors and offsets).

// refSkip scans one value without building it.
func (p *parser) refSkip(depth int) error {
	if depth > MaxDepth {
		return ErrTooDeep
	}
	if p.i >= len(p.s) {
		return p.err("unexpected end of input")
	}
	switch c := p.s[p.i]; c {
	case '{', '[':
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		p.i++
		p.ws()
		if p.i < len(p.s) && p.s[p.i] == closer {
			p.i++
			return nil
		}
		for {
			p.ws()
			if c == '{' {
				if p.i >= len(p.s) || p.s[p.i] != '"' {
					return p.err("expected a string key")
				}
				if err := p.refSkipString(); err != nil {
					return err
				}
				p.ws()
				if p.i >= len(p.s) || p.s[p.i] != ':' {
					return p.err("expected ':'")
				}
				p.i++
				p.ws()
			}
			if err := p.refSkip(depth + 1); err != nil {
				return err
			}
			p.ws()
			if p.i >= len(p.s) {
				return p.err("unexpected end of input")
			}
			if p.s[p.i] == ',' {
				p.i++
				continue
			}
			if p.s[p.i] == closer {
				p.i++
				return nil
			}
			return p.err("expected ',' or a closing bracket")
		}
	case '"':
		return p.refSkipString()
	}
	_, err := p.value(depth)
	return err
}

// refSkipString scans a string, checking escapes and UTF-8 lazily (only where needed).
func (p *parser) refSkipString() error {
	start := p.i
	p.i++
	for p.i < len(p.s) {
		c := p.s[p.i]
		switch {
		case c == '"':
			p.i++
			return nil
		case c == '\\' || c < 0x20 || c >= utf8.RuneSelf:
			// Rare or non-ASCII: validate with the full string parser.
			p.i = start
			_, err := p.str()
			return err
		}
		p.i++
	}
	return p.err("unterminated string")
}

// Check validates that data is one JSON value nested at most MaxDepth deep, without building
