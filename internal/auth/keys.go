// Package auth holds Hone's API keys and the rules of who may touch what.
//
// A key belongs to one entity and may only touch projects `<its entity>/<project>`. Keys look
// like `hone_<id>_<secret>`: the id finds the stored record, and the SHA-256 of the secret is
// compared with the stored hash in constant time. Secrets are never stored or logged; keys are
// random with more than 230 bits of entropy, so a fast hash is the right one.
//
// The training area authenticates with `Authorization: Bearer <key>`, the tracing area with
// `Authorization: Basic base64(<any username>:<key>)` as the Weave SDKs send it.
package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"
)

// Key is the stored record of an API key (never the secret).
type Key struct {
	ID         string     `json:"id"`
	Entity     string     `json:"entity"`
	Name       string     `json:"name,omitempty"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsedAt *time.Time `json:"last_used_at,omitempty"`
	RevokedAt  *time.Time `json:"revoked_at,omitempty"`
}

// Store is what the key service needs from storage.
type Store interface {
	InsertKey(ctx context.Context, k Key, hash []byte) error
	// GetKey returns the key with id and its secret hash; ErrNotFound if none.
	GetKey(ctx context.Context, id string) (Key, []byte, error)
	ListKeys(ctx context.Context, entity string) ([]Key, error)
	RevokeKey(ctx context.Context, id string, at time.Time) error
	TouchKey(ctx context.Context, id string, at time.Time) error
	CountKeys(ctx context.Context) (int, error)
}

// Errors of the key service.
var (
	ErrNotFound   = errors.New("auth: key not found")
	ErrInvalidKey = errors.New("auth: invalid API key")
	ErrRevoked    = errors.New("auth: API key revoked")
)

const (
	keyPrefix    = "hone_"
	idLen        = 12
	secretLen    = 40
	base62       = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	touchEvery   = time.Minute
	maxEntityLen = 64
)

var entityRe = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*$`)

// ValidEntity reports whether name can be an entity name: letters, digits, `_`, `.`, `-`,
// starting with a letter or digit, at most 64 characters.
func ValidEntity(name string) bool {
	return len(name) <= maxEntityLen && entityRe.MatchString(name)
}

// Keys is the key service.
type Keys struct {
	store Store
	now   func() time.Time

	mu      sync.Mutex
	touched map[string]time.Time // last time last_used_at was written, per key id
}

// NewKeys returns the key service on store.
func NewKeys(store Store) *Keys {
	return &Keys{store: store, now: time.Now, touched: map[string]time.Time{}}
}

func randomString(n int) (string, error) {
	// Rejection sampling keeps every base62 character equally likely.
	out := make([]byte, 0, n)
	buf := make([]byte, n*2)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", err
		}
		for _, b := range buf {
			if b < 248 { // 248 = 4*62
				out = append(out, base62[b%62])
				if len(out) == n {
					break
				}
			}
		}
	}
	return string(out), nil
}

func hashSecret(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}

// Create makes a new key for entity and returns its record and the full secret key, which is
// shown once and never stored.
func (k *Keys) Create(ctx context.Context, entity, name string) (Key, string, error) {
	return k.CreateAfter(ctx, entity, name, nil)
}

// CreateAfter is Create that first hands the new key to keep (when not nil), and stores the
// key only when keep succeeded: a key the caller must not lose (the first start's, written to
// a file) is never in the store without having been kept.
func (k *Keys) CreateAfter(ctx context.Context, entity, name string, keep func(key string) error) (Key, string, error) {
	if !ValidEntity(entity) {
		return Key{}, "", fmt.Errorf("auth: invalid entity name %q (letters, digits, '_', '.', '-'; at most %d characters)", entity, maxEntityLen)
	}
	id, err := randomString(idLen)
	if err != nil {
		return Key{}, "", err
	}
	secret, err := randomString(secretLen)
	if err != nil {
		return Key{}, "", err
	}
	rec := Key{ID: id, Entity: entity, Name: name, CreatedAt: k.now().UTC()}
	key := keyPrefix + id + "_" + secret
	if keep != nil {
		if err := keep(key); err != nil {
			return Key{}, "", err
		}
	}
	if err := k.store.InsertKey(ctx, rec, hashSecret(secret)); err != nil {
		return Key{}, "", err
	}
	return rec, key, nil
}

// splitKey splits `hone_<id>_<secret>`.
func splitKey(key string) (id, secret string, ok bool) {
	rest, ok := strings.CutPrefix(key, keyPrefix)
	if !ok || len(rest) != idLen+1+secretLen || rest[idLen] != '_' {
		return "", "", false
	}
	return rest[:idLen], rest[idLen+1:], true
}

// Verify checks a presented key and returns its record. Unknown, malformed and wrong keys are
// all ErrInvalidKey; a revoked key is ErrRevoked.
func (k *Keys) Verify(ctx context.Context, key string) (Key, error) {
	id, secret, ok := splitKey(key)
	if !ok {
		return Key{}, ErrInvalidKey
	}
	rec, stored, err := k.store.GetKey(ctx, id)
	if errors.Is(err, ErrNotFound) {
		// Spend the same hashing work as for a known id.
		subtle.ConstantTimeCompare(hashSecret(secret), make([]byte, sha256.Size))
		return Key{}, ErrInvalidKey
	}
	if err != nil {
		return Key{}, err
	}
	if subtle.ConstantTimeCompare(hashSecret(secret), stored) != 1 {
		return Key{}, ErrInvalidKey
	}
	if rec.RevokedAt != nil {
		return Key{}, ErrRevoked
	}
	k.touch(ctx, rec.ID)
	return rec, nil
}

// touch records use of a key at most once a minute, so that verification is not a write per request.
func (k *Keys) touch(ctx context.Context, id string) {
	now := k.now()
	k.mu.Lock()
	last, seen := k.touched[id]
	if seen && now.Sub(last) < touchEvery {
		k.mu.Unlock()
		return
	}
	k.touched[id] = now
	k.mu.Unlock()
	_ = k.store.TouchKey(context.WithoutCancel(ctx), id, now.UTC())
}

// List returns the keys of entity ("" = all), without secrets.
func (k *Keys) List(ctx context.Context, entity string) ([]Key, error) {
	return k.store.ListKeys(ctx, entity)
}

// Revoke revokes the key with id (a key id, or a full key whose id is used).
func (k *Keys) Revoke(ctx context.Context, id string) error {
	if kid, _, ok := splitKey(id); ok {
		id = kid
	}
	return k.store.RevokeKey(ctx, id, k.now().UTC())
}

// Count returns how many keys exist (revoked included).
func (k *Keys) Count(ctx context.Context) (int, error) { return k.store.CountKeys(ctx) }
