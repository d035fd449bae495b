// Package trace is Hone's Weave-compatible trace store: versioned objects, tables of rows,
// calls (traces), files, per-call usage roll-ups and token prices, per project
// `<entity>/<project>`. Digests are computed exactly as Weave computes them (see digest.go), so
// refs written by the Weave SDKs resolve here unchanged.
package trace

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"

	"github.com/honeai/hone/internal/pyjson"
)

// BytesDigest is Weave's digest of bytes: SHA-256, URL-safe base64 without padding, with `-`
// written as `X` and `_` as `Y` (43 characters of [A-Za-z0-9XY]).
func BytesDigest(b []byte) string {
	sum := sha256.Sum256(b)
	s := base64.RawURLEncoding.EncodeToString(sum[:])
	return strings.NewReplacer("-", "X", "_", "Y").Replace(s)
}

// ValueDigest is the digest of a JSON value: BytesDigest of Python's json.dumps text of it.
// Object digests and table row digests are value digests.
func ValueDigest(v pyjson.Value) string { return BytesDigest(pyjson.Dumps(v)) }

// TableDigest is the digest of a table: the hex SHA-256 of its row digests in order.
func TableDigest(rowDigests []string) string {
	h := sha256.New()
	for _, d := range rowDigests {
		h.Write([]byte(d))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ValidDigest reports whether s looks like a Weave value digest or a table digest.
func ValidDigest(s string) bool {
	if len(s) == 64 {
		for i := 0; i < len(s); i++ {
			c := s[i]
			if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
				return false
			}
		}
		return true
	}
	if len(s) != 43 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
