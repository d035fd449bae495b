package trace

import (
	"context"
	"strings"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/membudget"
)

// MaxFileBytes bounds one uploaded file.
const MaxFileBytes = 32 << 20

// FileCreate stores a file; its digest is Weave's digest of the bytes. expected (optional) is
// the digest the client computed: a mismatch is a 409 and stores nothing.
func (s *Service) FileCreate(ctx context.Context, project, name string, content []byte, expected string) (FileCreateRes, error) {
	if name == "" {
		name = "file"
	}
	digest := BytesDigest(content)
	if expected != "" && expected != digest {
		return FileCreateRes{}, fault.Conflict("expected_digest", "expected_digest: does not match the digest of the file's bytes (%s)", digest)
	}
	// A file new to the project is held to its entity's quota before it is written, and
	// charged once stored (a file stored again is not).
	charge := false
	if s.Quota != nil {
		if fs, ok := s.store.(fileStat); ok {
			have, err := fs.HasFile(ctx, project, digest)
			if err != nil {
				return FileCreateRes{}, err
			}
			charge = !have
		}
	}
	entity, _, _ := strings.Cut(project, "/")
	if charge {
		if err := s.Quota.Check(ctx, entity, int64(len(content)), "file"); err != nil {
			return FileCreateRes{}, err
		}
	}
	if err := s.store.PutFile(ctx, project, digest, name, content, s.nowString()); err != nil {
		return FileCreateRes{}, err
	}
	if charge {
		if err := s.Quota.Charge(ctx, entity, int64(len(content)), "file"); err != nil {
			return FileCreateRes{}, err
		}
	}
	ex := s.extrasFor(ctx, project)
	ex.claim("", "file:"+digest)
	return FileCreateRes{Digest: digest}, s.keepExtras(ctx, ex)
}

// FileContent returns a file's bytes.
func (s *Service) FileContent(ctx context.Context, req FileContentReadReq) ([]byte, error) {
	b, err := s.store.GetFile(ctx, req.ProjectID, req.Digest)
	if err == nil {
		err = membudget.Charge(ctx, len(b))
	}
	return b, mapNotFound(err, "File %s not found", req.Digest)
}

// fileStat is what a store tells of a file without reading it.
type fileStat interface {
	HasFile(ctx context.Context, project, digest string) (bool, error)
}
