package auth

import (
	"encoding/base64"
	"errors"
	"strings"
)

// Scheme is an HTTP authentication scheme Hone accepts.
type Scheme int

const (
	// Bearer is `Authorization: Bearer <key>` (training area).
	Bearer Scheme = iota + 1
	// Basic is `Authorization: Basic base64(<username>:<key>)` (tracing area).
	Basic
)

func (s Scheme) String() string {
	switch s {
	case Bearer:
		return "Bearer"
	case Basic:
		return "Basic"
	}
	return "none"
}

// Challenge is the WWW-Authenticate value of a request refused for want of credentials of
// scheme s.
func (s Scheme) Challenge() string { return s.String() + ` realm="hone"` }

// Errors of ParseAuthorization; their texts are safe to show to clients.
var (
	ErrNoCredentials = errors.New("missing Authorization header")
	ErrBadScheme     = errors.New("unsupported authorization scheme")
	ErrBadBasic      = errors.New("malformed Basic credentials: expected base64 of <username>:<api key>")
	ErrEmptyKey      = errors.New("empty API key")
)

// maxHeaderKey bounds the credentials we look at; real keys are 58 characters.
const maxHeaderKey = 1024

// ParseAuthorization parses an Authorization header value into its scheme and API key. For
// Basic the key is the password; the username is ignored (the Weave SDK sends `api`).
func ParseAuthorization(h string) (Scheme, string, error) {
	h = strings.TrimSpace(h)
	if h == "" {
		return 0, "", ErrNoCredentials
	}
	name, cred, found := strings.Cut(h, " ")
	if !found {
		return 0, "", ErrBadScheme
	}
	cred = strings.TrimSpace(cred)
	if len(cred) > maxHeaderKey*2 {
		return 0, "", ErrEmptyKey
	}
	switch {
	case strings.EqualFold(name, "Bearer"):
		if cred == "" || strings.ContainsAny(cred, " \t") {
			return Bearer, "", ErrEmptyKey
		}
		return Bearer, cred, nil
	case strings.EqualFold(name, "Basic"):
		raw, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			// Some clients omit padding.
			raw, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(cred, "="))
			if err != nil {
				return Basic, "", ErrBadBasic
			}
		}
		_, pass, ok := strings.Cut(string(raw), ":")
		if !ok {
			return Basic, "", ErrBadBasic
		}
		if pass == "" {
			return Basic, "", ErrEmptyKey
		}
		return Basic, pass, nil
	}
	return 0, "", ErrBadScheme
}
