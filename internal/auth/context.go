package auth

import (
	"context"
	"strings"
	"unicode"

	"github.com/honeai/hone/internal/fault"
)

// Principal is who a request acts as: the key that authenticated it and the key's entity.
type Principal struct {
	KeyID  string
	Entity string
}

type ctxKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, ctxKey{}, p)
}

// FromContext returns the principal of an authenticated request.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(ctxKey{}).(Principal)
	return p, ok
}

// maxProjectPart bounds entity and project names.
const maxProjectPart = 128

// SplitProject splits a project id `<entity>/<project>`. param names the request field of the
// fault.Invalid it returns when the id is malformed.
func SplitProject(projectID, param string) (entity, project string, err error) {
	entity, project, ok := strings.Cut(projectID, "/")
	if !ok || entity == "" || project == "" || strings.Contains(project, "/") {
		return "", "", fault.Invalid(param, "%s must have the form <entity>/<project>, got %q", param, projectID)
	}
	if !ValidEntity(entity) {
		return "", "", fault.Invalid(param, "%s: invalid entity name %q", param, entity)
	}
	if len(project) > maxProjectPart || strings.IndexFunc(project, func(r rune) bool {
		return unicode.IsControl(r) || r == ':' || r == '\\'
	}) >= 0 || strings.TrimSpace(project) != project {
		return "", "", fault.Invalid(param, "%s: invalid project name %q", param, project)
	}
	return entity, project, nil
}

// Project checks that the request's principal may touch projectID and returns its parts. A
// malformed id is a fault.Invalid naming param (400); a project of another entity is a
// fault.Forbidden (403) that says nothing of whether it exists.
func Project(ctx context.Context, projectID, param string) (entity, project string, err error) {
	p, _ := FromContext(ctx)
	return p.Project(projectID, param)
}

// Entity checks that the request's principal belongs to entity: fault.Unauthenticated when
// ctx carries no principal, fault.Forbidden naming param when it is another entity's.
func Entity(ctx context.Context, entity, param string) error {
	p, ok := FromContext(ctx)
	if !ok {
		return fault.Unauthenticated("authentication required")
	}
	return p.CheckEntity(entity, param)
}

// Project is the package's Project for a principal given as a value (the zero Principal is
// no one: fault.Unauthenticated).
func (p Principal) Project(projectID, param string) (entity, project string, err error) {
	entity, project, err = SplitProject(projectID, param)
	if err != nil {
		return "", "", err
	}
	if err := p.CheckEntity(entity, param); err != nil {
		return "", "", err
	}
	return entity, project, nil
}

// CheckEntity is the package's Entity for a principal given as a value (the zero Principal is
// no one: fault.Unauthenticated).
func (p Principal) CheckEntity(entity, param string) error {
	if p == (Principal{}) {
		return fault.Unauthenticated("authentication required")
	}
	if p.Entity != entity {
		return fault.Forbidden(param, "this API key may only access projects of entity %q", p.Entity)
	}
	return nil
}
