package trace

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/honeai/hone/internal/db"
	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/pyjson"
	"github.com/honeai/hone/internal/quota"
)

// Service is the trace store's logic: validation, digests and derived fields over a Store.
// Project ids reaching it have been authorised by the caller.
type Service struct {
	store Store
	now   func() time.Time
	sorts *sortCache
	// log receives the once-per-field warnings about unknown request fields (nil:
	// slog.Default()); loggedUnknown remembers which were logged.
	log           *slog.Logger
	loggedUnknown sync.Map
	// Quota, when set, counts and bounds the bytes of the files each entity stores (files.go).
	Quota *quota.Quota
}

// NewService returns the service on store.
func NewService(store Store) *Service {
	return &Service{store: store, now: time.Now, sorts: newSortCache(64)}
}

func (s *Service) nowString() string { return db.FormatTime(s.now()) }

func badField(field, format string, args ...any) error {
	return fault.Invalid(field, "%s: %s", field, fmt.Sprintf(format, args...))
}

// parseValue parses a raw JSON value of a request field (an absent value is null).
func parseValue(raw json.RawMessage, field string) (pyjson.Value, error) {
	if len(raw) == 0 {
		return pyjson.Value{Kind: pyjson.Null}, nil
	}
	v, err := pyjson.Parse(raw)
	if errors.Is(err, pyjson.ErrTooDeep) {
		return v, badField(field, "value nested deeper than %d levels", pyjson.MaxDepth)
	}
	if err != nil {
		return v, badField(field, "invalid JSON: %v", err)
	}
	return v, nil
}

// parseObject parses a field that must be a JSON object (absent: {}).
func parseObject(raw json.RawMessage, field string) (pyjson.Value, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return pyjson.Value{Kind: pyjson.Object}, nil
	}
	v, err := parseValue(raw, field)
	if err != nil {
		return v, err
	}
	if v.Kind != pyjson.Object {
		return v, badField(field, "must be a JSON object")
	}
	return v, nil
}

func checkLimitOffset(limit, offset *int) (int, int, error) {
	l, o := -1, 0
	if limit != nil {
		if *limit < 0 {
			return 0, 0, fault.Invalid("limit", "limit must be >= 0, got %d", *limit)
		}
		l = *limit
	}
	if offset != nil {
		if *offset < 0 {
			return 0, 0, fault.Invalid("offset", "offset must be >= 0, got %d", *offset)
		}
		o = *offset
	}
	return l, o, nil
}

// MaxNameLen bounds object ids, op names, tags and aliases.
const MaxNameLen = 128

func checkName(field, s string) error {
	if s == "" {
		return badField(field, "must not be empty")
	}
	if len(s) > MaxNameLen {
		return badField(field, "longer than %d characters", MaxNameLen)
	}
	if !utf8.ValidString(s) {
		return badField(field, "is not valid UTF-8")
	}
	if strings.ContainsAny(s, "/:") || strings.IndexFunc(s, func(r rune) bool { return unicode.IsControl(r) || unicode.IsSpace(r) }) >= 0 {
		return badField(field, "%q may not contain '/', ':', spaces or control characters", s)
	}
	return nil
}

// normTime turns an ISO 8601 timestamp into the stored UTC form.
func normTime(field, s string) (string, error) {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return db.FormatTime(t), nil
		}
	}
	return "", badField(field, "invalid ISO 8601 date-time %q", s)
}

func notFound(format string, args ...any) error { return fault.NotFound("", format, args...) }

func mapNotFound(err error, format string, args ...any) error {
	if errors.Is(err, ErrNotFound) {
		return notFound(format, args...)
	}
	return err
}

func newID() string { return uuid.Must(uuid.NewV7()).String() }

func optString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func selectFields(m map[string]any, fields []string) map[string]any {
	if len(fields) == 0 {
		return m
	}
	out := make(map[string]any, len(fields))
	for _, f := range fields {
		if v, ok := m[f]; ok {
			out[f] = v
		}
	}
	return out
}

func toMap(v any) map[string]any {
	b, _ := json.Marshal(v)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return m
}

func checkFields(fields []string, known map[string]ValueType, param string) error {
	for i, f := range fields {
		if _, ok := known[f]; !ok {
			return fault.Invalid(fmt.Sprintf("%s[%d]", param, i), "%s[%d]: unknown field %q", param, i, f)
		}
	}
	return nil
}
