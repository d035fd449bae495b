package trace

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/honeai/hone/internal/fault"
	"github.com/honeai/hone/internal/membudget"
	"github.com/honeai/hone/internal/pyjson"
)

var versionRe = regexp.MustCompile(`^v(\d+)$`)

// ObjCreate stores an object version and returns its digest. The same digest twice is a no-op.
func (s *Service) ObjCreate(ctx context.Context, req ObjCreateReq, wbUserID string) (ObjCreateRes, error) {
	o := req.Obj
	if err := checkName("obj.object_id", o.ObjectID); err != nil {
		return ObjCreateRes{}, err
	}
	if len(o.Val) == 0 {
		return ObjCreateRes{}, badField("obj.val", "is required")
	}
	val, err := parseValue(o.Val, "obj.val")
	if err != nil {
		return ObjCreateRes{}, err
	}
	base, leaf := ObjectClasses(val)
	if o.BuiltinObjectClass != nil && *o.BuiltinObjectClass != "" {
		// Hone keeps the value as sent; the declared class names it.
		if val.Kind != pyjson.Object {
			return ObjCreateRes{}, badField("obj.val", "must be an object when builtin_object_class is set")
		}
		base = *o.BuiltinObjectClass
		if leaf == "" {
			leaf = base
		}
	} else if o.SetBaseObjectClass != nil && *o.SetBaseObjectClass != "" {
		base = *o.SetBaseObjectClass
	}
	digest := ValueDigest(val)
	if o.ExpectedDigest != nil && *o.ExpectedDigest != "" && *o.ExpectedDigest != digest {
		return ObjCreateRes{}, fault.Conflict("obj.expected_digest", "obj.expected_digest: does not match the digest Hone computed (%s); Hone digests keys in arrival order", digest)
	}
	row := ObjectRow{
		ProjectID: o.ProjectID, ObjectID: o.ObjectID, Digest: digest, Kind: Kind(val),
		BaseObjectClass: base, LeafObjectClass: leaf, Val: pyjson.Compact(val),
		SizeBytes: int64(len(pyjson.Dumps(val))), CreatedAt: s.nowString(), WBUserID: wbUserID,
	}
	if _, err := s.store.InsertObject(ctx, row); err != nil {
		return ObjCreateRes{}, err
	}
	ex := s.extrasFor(ctx, o.ProjectID)
	ex.claim("", "object:"+o.ObjectID+":"+digest)
	return ObjCreateRes{Digest: digest, ObjectID: o.ObjectID}, s.keepExtras(ctx, ex)
}

func toSchema(o ObjectRow, metadataOnly bool) ObjSchema {
	out := ObjSchema{
		ProjectID: o.ProjectID, ObjectID: o.ObjectID, CreatedAt: o.CreatedAt, Digest: o.Digest,
		VersionIndex: o.VersionIndex, Kind: o.Kind, Val: json.RawMessage(o.Val),
	}
	if o.IsLatest {
		out.IsLatest = 1
	}
	if o.DeletedAt != "" {
		d := o.DeletedAt
		out.DeletedAt = &d
	}
	if o.BaseObjectClass != "" {
		b := o.BaseObjectClass
		out.BaseObjectClass = &b
	}
	if o.LeafObjectClass != "" {
		l := o.LeafObjectClass
		out.LeafObjectClass = &l
	}
	if o.WBUserID != "" {
		u := o.WBUserID
		out.WBUserID = &u
	}
	if metadataOnly || len(o.Val) == 0 {
		out.Val = json.RawMessage("{}")
	}
	return out
}

func parseSelector(digest string) VersionSelector {
	switch {
	case digest == "latest":
		return VersionSelector{Latest: true, Version: -1}
	case versionRe.MatchString(digest):
		n, err := strconv.Atoi(digest[1:])
		if err == nil {
			return VersionSelector{Version: n}
		}
	case ValidDigest(digest):
		return VersionSelector{Digest: digest, Version: -1}
	}
	return VersionSelector{Alias: digest, Version: -1}
}

// ObjRead reads a version by digest, "latest", "v<N>" or alias.
func (s *Service) ObjRead(ctx context.Context, req ObjReadReq) (ObjReadRes, error) {
	if err := checkName("object_id", req.ObjectID); err != nil {
		return ObjReadRes{}, err
	}
	if req.Digest == "" {
		return ObjReadRes{}, badField("digest", "must not be empty")
	}
	o, err := s.store.ReadObject(ctx, req.ProjectID, req.ObjectID, parseSelector(req.Digest))
	if errors.Is(err, ErrDeleted) {
		return ObjReadRes{}, notFound("%s:v%d was deleted at %s", o.ObjectID, o.VersionIndex, o.DeletedAt)
	}
	if errors.Is(err, ErrNotFound) {
		return ObjReadRes{}, notFound("Obj %s:%s not found", req.ObjectID, req.Digest)
	}
	if err != nil {
		return ObjReadRes{}, err
	}
	if err := membudget.Charge(ctx, len(o.Val)); err != nil {
		return ObjReadRes{}, err
	}
	res := ObjReadRes{Obj: toSchema(o, req.MetadataOnly)}
	if req.IncludeTagsAndAliases {
		if err := s.addTagsAndAliases(ctx, req.ProjectID, []*ObjSchema{&res.Obj}); err != nil {
			return ObjReadRes{}, err
		}
	}
	return res, nil
}

func (s *Service) addTagsAndAliases(ctx context.Context, project string, objs []*ObjSchema) error {
	keys := make([]ObjectKey, len(objs))
	for i, o := range objs {
		keys[i] = ObjectKey{o.ObjectID, o.Digest}
	}
	tags, aliases, err := s.store.TagsAndAliases(ctx, project, keys)
	if err != nil {
		return err
	}
	for i, o := range objs {
		t := append([]string{}, tags[keys[i]]...)
		a := []string{}
		if o.IsLatest == 1 {
			a = append(a, "latest")
		}
		a = append(a, aliases[keys[i]]...)
		o.Tags, o.Aliases = &t, &a
	}
	return nil
}

// ObjsQuery answers /objs/query.
func (s *Service) ObjsQuery(ctx context.Context, req ObjQueryReq) (ObjQueryRes, error) {
	limit, offset, err := checkLimitOffset(req.Limit, req.Offset)
	if err != nil {
		return ObjQueryRes{}, err
	}
	q := ObjectQuery{Limit: limit, Offset: offset, MetadataOnly: req.MetadataOnly != nil && *req.MetadataOnly}
	if req.Filter != nil {
		q.Filter = *req.Filter
	}
	for i, sb := range req.SortBy {
		if sb.Field != "object_id" && sb.Field != "created_at" {
			return ObjQueryRes{}, fault.Invalid(fmt.Sprintf("sort_by[%d].field", i),
				"sort_by[%d].field: cannot sort objects by %q (supported: object_id, created_at)", i, sb.Field)
		}
		dir := sb.Dir()
		if dir == "" {
			dir = "asc"
		}
		if dir != "asc" && dir != "desc" {
			return ObjQueryRes{}, fault.Invalid(fmt.Sprintf("sort_by[%d].direction", i),
				"sort_by[%d].direction: invalid direction %q (asc or desc)", i, sb.Dir())
		}
		q.Sort = append(q.Sort, SortBy{Field: sb.Field, Direction: dir})
	}
	rows, err := s.store.QueryObjects(ctx, req.ProjectID, q)
	if err != nil {
		return ObjQueryRes{}, err
	}
	loaded := 0
	for _, r := range rows {
		loaded += len(r.Val)
	}
	if err := membudget.Charge(ctx, loaded); err != nil {
		return ObjQueryRes{}, err
	}
	res := ObjQueryRes{Objs: make([]ObjSchema, len(rows))}
	ptrs := make([]*ObjSchema, len(rows))
	for i, r := range rows {
		res.Objs[i] = toSchema(r, q.MetadataOnly)
		if req.IncludeStorageSize != nil && *req.IncludeStorageSize {
			n := r.SizeBytes
			res.Objs[i].SizeBytes = &n
		}
		ptrs[i] = &res.Objs[i]
	}
	if req.IncludeTagsAndAliases != nil && *req.IncludeTagsAndAliases {
		if err := s.addTagsAndAliases(ctx, req.ProjectID, ptrs); err != nil {
			return ObjQueryRes{}, err
		}
	}
	return res, nil
}

// MaxDeleteDigests bounds the digests of one /obj/delete.
const MaxDeleteDigests = 100

// ObjDelete soft-deletes versions of an object (all when no digests are given).
func (s *Service) ObjDelete(ctx context.Context, req ObjDeleteReq) (ObjDeleteRes, error) {
	if err := checkName("object_id", req.ObjectID); err != nil {
		return ObjDeleteRes{}, err
	}
	if len(req.Digests) > MaxDeleteDigests {
		return ObjDeleteRes{}, badField("digests", "at most %d digests per request", MaxDeleteDigests)
	}
	// Digests may also be given as "latest" or "v<N>".
	digests := make([]string, 0, len(req.Digests))
	for i, d := range req.Digests {
		sel := parseSelector(d)
		if sel.Digest != "" {
			digests = append(digests, d)
			continue
		}
		o, err := s.store.ReadObject(ctx, req.ProjectID, req.ObjectID, sel)
		if err != nil {
			return ObjDeleteRes{}, notFound("digests[%d]: object %s:%s not found", i, req.ObjectID, d)
		}
		digests = append(digests, o.Digest)
	}
	deleted, err := s.store.DeleteObjects(ctx, req.ProjectID, req.ObjectID, digests, s.nowString())
	if errors.Is(err, ErrNotFound) {
		return ObjDeleteRes{}, notFound("Object %s not found (or already deleted): %v", req.ObjectID, strings.TrimPrefix(err.Error(), ErrNotFound.Error()+": "))
	}
	if err != nil {
		return ObjDeleteRes{}, err
	}
	return ObjDeleteRes{NumDeleted: len(deleted), DeletedVersions: deleted}, nil
}

func checkLabels(field string, labels []string) ([]string, error) {
	if len(labels) == 0 {
		return nil, badField(field, "must name at least one")
	}
	seen := map[string]bool{}
	var out []string
	for i, l := range labels {
		if err := checkName(fmt.Sprintf("%s[%d]", field, i), l); err != nil {
			return nil, err
		}
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out, nil
}

// AddTags tags a version.
func (s *Service) AddTags(ctx context.Context, project, objectID, digest string, tags []string) error {
	tags, err := checkLabels("tags", tags)
	if err != nil {
		return err
	}
	if err := mapNotFound(s.store.AddTags(ctx, project, objectID, digest, tags, s.nowString()), "Obj %s:%s not found", objectID, digest); err != nil {
		return err
	}
	ex := s.extrasFor(ctx, project)
	ex.claim("", "object:"+objectID+":"+digest)
	return s.keepExtras(ctx, ex)
}

// RemoveTags removes tags from a version.
func (s *Service) RemoveTags(ctx context.Context, project, objectID, digest string, tags []string) error {
	tags, err := checkLabels("tags", tags)
	if err != nil {
		return err
	}
	return mapNotFound(s.store.RemoveTags(ctx, project, objectID, digest, tags), "Obj %s:%s not found", objectID, digest)
}

// SetAliases points aliases at a version. "latest" and "v<N>" are reserved.
func (s *Service) SetAliases(ctx context.Context, project, objectID, digest string, aliases []string) error {
	aliases, err := checkLabels("aliases", aliases)
	if err != nil {
		return err
	}
	for i, a := range aliases {
		if a == "latest" || versionRe.MatchString(a) {
			return badField(fmt.Sprintf("aliases[%d]", i), "%q is reserved", a)
		}
	}
	if err := mapNotFound(s.store.SetAliases(ctx, project, objectID, digest, aliases, s.nowString()), "Obj %s:%s not found", objectID, digest); err != nil {
		return err
	}
	ex := s.extrasFor(ctx, project)
	ex.claim("", "object:"+objectID)
	return s.keepExtras(ctx, ex)
}

// RemoveAliases removes aliases of an object.
func (s *Service) RemoveAliases(ctx context.Context, project, objectID string, aliases []string) error {
	aliases, err := checkLabels("aliases", aliases)
	if err != nil {
		return err
	}
	return s.store.RemoveAliases(ctx, project, objectID, aliases)
}

// ListTags lists a project's tags.
func (s *Service) ListTags(ctx context.Context, project string) (TagsListRes, error) {
	t, err := s.store.ListTags(ctx, project)
	return TagsListRes{Tags: t}, err
}

// ListProjects lists the projects of entity that hold calls or objects (`GET /projects`).
func (s *Service) ListProjects(ctx context.Context, entity string) (ProjectsListRes, error) {
	p, err := s.store.ListProjects(ctx, entity)
	return ProjectsListRes{Projects: p}, err
}

// ListAliases lists a project's aliases.
func (s *Service) ListAliases(ctx context.Context, project string) (AliasesListRes, error) {
	a, err := s.store.ListAliases(ctx, project)
	return AliasesListRes{Aliases: a}, err
}
