package hub

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// Errors a pull ends with, each with a message that says what to do. errors.Is tells them
// apart.
var (
	// ErrNotFound: the repository, model, revision, tag, quantization or file does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAccess: the hub wants a token, or a licence accepted (a gated repository).
	ErrAccess = errors.New("access denied")
	// ErrNoWeights: the repository holds nothing Hone can load.
	ErrNoWeights = errors.New("no weights Hone can load")
	// ErrChecksum: a downloaded file's hash is not the one the hub publishes.
	ErrChecksum = errors.New("checksum mismatch")
	// ErrDiskFull: the cache's disk has no room for the download.
	ErrDiskFull = errors.New("disk full")
	// ErrOffline: offline (HF_HUB_OFFLINE, HONE_OFFLINE) and not in a cache.
	ErrOffline = errors.New("offline and not cached")
	// ErrRateLimited: the hub kept answering 429.
	ErrRateLimited = errors.New("rate limited")
)

// pullError is an error of a pull: its kind (one of the Err values) and the message.
type pullError struct {
	kind error
	msg  string
}

func (e *pullError) Error() string        { return e.msg }
func (e *pullError) Is(target error) bool { return target == e.kind }

func errorf(kind error, format string, args ...any) error {
	return &pullError{kind: kind, msg: fmt.Sprintf(format, args...)}
}

// statusError is an HTTP answer that is not a success, kept for the caller to explain.
type statusError struct {
	url        string
	code       int
	errorCode  string // the Hugging Face Hub's X-Error-Code
	message    string // X-Error-Message, or the registry's error message
	retryAfter time.Duration
	// authenticate is the WWW-Authenticate challenge of a 401.
	authenticate string
}

func (e *statusError) Error() string {
	s := fmt.Sprintf("%s: %d %s", redact(e.url), e.code, http.StatusText(e.code))
	if e.errorCode != "" {
		s += " (" + e.errorCode + ")"
	}
	if e.message != "" {
		s += ": " + e.message
	}
	return s
}

// retryable reports whether an answer may succeed when asked again.
func (e *statusError) retryable() bool {
	switch e.code {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusRequestTimeout:
		return true
	}
	return false
}

// newStatusError reads a failed response's status and error headers.
func newStatusError(resp *http.Response, body []byte) *statusError {
	e := &statusError{url: resp.Request.URL.String(), code: resp.StatusCode,
		errorCode: resp.Header.Get("X-Error-Code"), message: resp.Header.Get("X-Error-Message"),
		authenticate: resp.Header.Get("WWW-Authenticate")}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		if s, err := strconv.Atoi(strings.TrimSpace(ra)); err == nil && s >= 0 {
			e.retryAfter = time.Duration(s) * time.Second
		} else if t, err := http.ParseTime(ra); err == nil {
			e.retryAfter = time.Until(t)
		}
	}
	if e.message == "" && len(body) > 0 {
		e.message = errorBody(body)
	}
	return e
}

// errorBody takes the message out of an error body: the hub's {"error": "..."}, the
// registry's {"errors": [{"code": ..., "message": ...}]}, or the first line of text.
func errorBody(b []byte) string {
	var v struct {
		Error  any `json:"error"`
		Errors []struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"errors"`
	}
	if json.Unmarshal(b, &v) == nil {
		if s, ok := v.Error.(string); ok && s != "" {
			return s
		}
		if len(v.Errors) > 0 {
			if v.Errors[0].Message != "" {
				return v.Errors[0].Message
			}
			return v.Errors[0].Code
		}
	}
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// redact drops a URL's query (a signed CDN URL's signature) for messages.
func redact(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		return u[:i] + "?…"
	}
	return u
}

// diskFull is the message of a download that does not fit.
func diskFull(dir string, need, free int64) error {
	return errorf(ErrDiskFull, "not enough disk space in %s: the download needs %s more and %s is free; free some space (hone models list shows the cache, hone models rm REF removes a model) or point HONE_HOME at a larger disk",
		dir, humanize.IBytes(uint64(need)), humanize.IBytes(uint64(max(free, 0))))
}
