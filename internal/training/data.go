package training

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/trace"
)

// checkDataURL validates training_data_url when the job is created: a weave:/// ref of the
// caller's entity (a Dataset object, by digest, version, alias or "latest", or a table), an
// uploaded file (hone-file:///<id>), or a path under DataRoot.
func (s *Service) checkDataURL(ctx context.Context, entity, u string) error {
	return s.checkDataURLOf(ctx, "training_data_url", entity, u)
}

// checkDataURLOf is checkDataURL for a request field named param.
func (s *Service) checkDataURLOf(ctx context.Context, param, entity, u string) error {
	scheme, _, hasScheme := strings.Cut(u, "://")
	switch {
	case u == "":
		return fault.Invalid(param, "%s is required", param)
	case strings.HasPrefix(u, "weave:///"):
		ref, err := trace.ParseRef(u)
		if err != nil || (ref.Kind != "object" && ref.Kind != "table") || len(ref.Extra) > 0 {
			return fault.Invalid(param, "%s %q is not a weave:///<entity>/<project>/object/<name>:<digest> or weave:///<entity>/<project>/table/<digest> ref", param, u)
		}
		if ref.Entity != entity {
			return fault.Forbidden(param, "this API key may only use data of entity %q", entity)
		}
		if s.Trace == nil {
			return fault.Invalid(param, "this server has no trace store to read %s from", u)
		}
		if err := s.weaveExists(ctx, ref); err != nil {
			return fault.NotFound(param, "%s %s: %v", param, u, err)
		}
	case strings.HasPrefix(u, "hone-file:///"):
		id := strings.TrimPrefix(u, "hone-file:///")
		if !strings.HasPrefix(id, "file-") || strings.ContainsAny(id, "/\\.") {
			return fault.Invalid(param, "%s %q does not name an uploaded file", param, u)
		}
		if s.Blobs != nil {
			return s.sharedUploadExists(ctx, param, entity, id)
		}
		if _, err := os.Stat(filepath.Join(s.FilesDir, entity, id+".jsonl")); err != nil {
			return fault.NotFound(param, "uploaded file %s not found", id)
		}
	case strings.HasPrefix(u, "wandb-artifact://"):
		_, err := s.artifactPath(ctx, entity, u)
		return err
	case hasScheme && scheme != "file":
		return fault.Invalid(param, "%s %q: the %s:// scheme is not supported (weave:///, hone-file:///, or a file path under the training data root)", param, u, scheme)
	default:
		p := strings.TrimPrefix(u, "file://")
		if _, err := s.localPath(p); err != nil {
			return fault.Invalid(param, "%v", err)
		}
	}
	return nil
}

// ArtifactDataFile is the file of a W&B dataset artifact that SFT trains on (what ART's
// serverless backend uploads).
const ArtifactDataFile = "train.jsonl"

// artifactPath resolves wandb-artifact:///<entity>/<project>/<name>[:<version or alias>] to
// the path of its train.jsonl in the blob store.
func (s *Service) artifactPath(ctx context.Context, entity, u string) (string, error) {
	const param = "training_data_url"
	rest, ok := strings.CutPrefix(u, "wandb-artifact:///")
	parts := strings.Split(rest, "/")
	if !ok || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" || strings.HasPrefix(parts[2], ":") {
		return "", fault.Invalid(param, "training_data_url %q is not a wandb-artifact:///<entity>/<project>/<name>:<version> URL", u)
	}
	if parts[0] != entity {
		return "", fault.Forbidden(param, "this API key may only use data of entity %q", entity)
	}
	if s.Artifacts == nil {
		return "", fault.Invalid(param, "training_data_url %q: this server keeps no W&B artifacts", u)
	}
	p, err := s.Artifacts.ResolveFile(ctx, parts[0], parts[1], parts[2], ArtifactDataFile)
	var f *fault.Error
	if errors.As(err, &f) {
		return "", &fault.Error{Kind: f.Kind, Field: param, Msg: "training_data_url " + u + ": " + f.Msg}
	}
	return p, err
}

// weaveExists checks that the object or table a ref names exists.
func (s *Service) weaveExists(ctx context.Context, ref trace.Ref) error {
	project := ref.Entity + "/" + ref.Project
	if ref.Kind == "table" {
		_, err := s.Trace.TableQueryStats(ctx, trace.TableQueryStatsReq{ProjectID: project, Digest: ref.Digest})
		return err
	}
	_, err := s.Trace.ObjRead(ctx, trace.ObjReadReq{ProjectID: project, ObjectID: ref.Name, Digest: ref.Digest, MetadataOnly: true})
	return err
}

// localPath accepts only a file under DataRoot (after resolving symlinks: no traversal).
func (s *Service) localPath(p string) (string, error) {
	if s.DataRoot == "" {
		return "", fmt.Errorf("training_data_url %q: local paths are not enabled on this server (start it with --train-data-root)", p)
	}
	root, err := filepath.EvalSymlinks(s.DataRoot)
	if err != nil {
		return "", fmt.Errorf("the training data root is not readable: %w", err)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", fmt.Errorf("training_data_url %q: no such file", p)
	}
	if rel, err := filepath.Rel(root, real); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("training_data_url %q is outside the training data root", p)
	}
	// The root itself, or any directory under it, is accepted by the checks above but read
	// as a file only when the job runs: refuse it now.
	if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("training_data_url %q is not a regular file (a directory, or the training data root itself)", p)
	}
	return real, nil
}

// readData returns the JSONL bytes of training_data_url.
func (s *Service) readData(ctx context.Context, entity, u string) ([]byte, error) {
	switch {
	case strings.HasPrefix(u, "weave:///"):
		ref, err := trace.ParseRef(u)
		if err != nil {
			return nil, err
		}
		rows, err := s.Trace.DatasetRows(ctx, ref)
		if err != nil {
			return nil, fmt.Errorf("reading the rows of %s: %w", u, err)
		}
		var buf bytes.Buffer
		for _, row := range rows {
			buf.Write(row)
			buf.WriteByte('\n')
		}
		return buf.Bytes(), nil
	case strings.HasPrefix(u, "hone-file:///"):
		if s.Blobs != nil {
			return s.readSharedUpload(ctx, entity, strings.TrimPrefix(u, "hone-file:///"))
		}
		return os.ReadFile(filepath.Join(s.FilesDir, entity, strings.TrimPrefix(u, "hone-file:///")+".jsonl"))
	case strings.HasPrefix(u, "wandb-artifact://"):
		p, err := s.artifactPath(ctx, entity, u)
		if err != nil {
			return nil, err
		}
		return os.ReadFile(p)
	}
	p, err := s.localPath(strings.TrimPrefix(u, "file://"))
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p)
}
