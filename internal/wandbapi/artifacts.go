package wandbapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/honeai/hone/internal/wandb"
)

// The artifact fields: an artifact and its collection (by id, or by name through its
// project), and the mutations the wandb SDK logs one with: createArtifact,
// createArtifactFiles, createArtifactManifest (or updateArtifactManifest), commitArtifact;
// then useArtifact and updateArtifact.

// uploadURL is the URL a PUT stores an upload at; the token rides in the query, which the
// access log leaves out.
func (c *gqlCtx) uploadURL(token string) string {
	return c.base + UploadPath + "?token=" + token
}

// fileURL is where an artifact's file is downloaded (W&B's storage layout V2 path), signed so
// that it works without credentials for a while, as W&B's direct URLs do; the signature rides
// in the query, which the access log leaves out.
func (c *gqlCtx) fileURL(entity, artifactID, md5hex, name string) string {
	exp, sig := c.wb.SignDownload(entity, md5hex)
	return fmt.Sprintf("%s/artifactsV2/default/%s/%s/%s/%s?exp=%d&sig=%s", c.base, url.PathEscape(entity), url.PathEscape(artifactID), md5hex, url.PathEscape(name), exp, sig)
}

func collectionObj(c *gqlCtx, entity, project, name, typ string) gqlArtifactSequence {
	o := gqlArtifactSequence{ID: wandb.GlobalID("ArtifactSequence", entity+"/"+project+"/"+name), Name: name,
		DigestAlgorithm: "MANIFEST_MD5", Project: projectInfo(c, entity, project),
		DefaultArtifactType: gqlTypeRef{Name: typ}, Type: gqlTypeRef{Name: typ}}
	o.LatestArtifact = lazy(func() (*gqlArtifact, error) {
		a, err := c.wb.ArtifactByName(c.ctx, entity, project, name, "latest")
		if errors.Is(err, wandb.ErrNotFound) {
			return nil, nil
		}
		o := artifactObj(c, a)
		return &o, err
	})
	versions := lazy(func() (*gqlVersionConnection, error) {
		as, err := c.wb.Versions(c.ctx, entity, project, name, "")
		if err != nil {
			return nil, err
		}
		edges := make([]gqlVersionEdge, len(as))
		for i, a := range as {
			edges[i] = gqlVersionEdge{Node: artifactObj(c, a), Cursor: a.ID, Version: a.Version()}
		}
		return &gqlVersionConnection{TotalCount: len(as), Edges: edges}, nil
	})
	o.ArtifactMembership = field(func(args membershipArgs) (*gqlMembership, error) {
		a, err := c.wb.ArtifactByName(c.ctx, entity, project, name, args.AliasName)
		if errors.Is(err, wandb.ErrNotFound) {
			return nil, nil
		}
		m := membershipObj(c, a)
		return &m, err
	})
	o.Artifacts = versions
	o.ArtifactMemberships = versions
	return o
}

func artifactObj(c *gqlCtx, a wandb.Artifact) gqlArtifact {
	aliases := make([]gqlArtifactAlias, len(a.Aliases))
	for i, al := range a.Aliases {
		aliases[i] = gqlArtifactAlias{ID: wandb.GlobalID("ArtifactAlias", a.ID+"/"+al), Alias: al, ArtifactCollection: gqlSequenceRef{
			ID: a.SequenceID(), Name: a.Collection, Project: projectInfo(c, a.Entity, a.Project)}}
	}
	var versionIndex *int
	if a.VersionIndex >= 0 {
		versionIndex = &a.VersionIndex
	}
	seq := collectionObj(c, a.Entity, a.Project, a.Collection, a.Type)
	o := gqlArtifact{ID: a.ID, State: a.State, Digest: a.Digest, CommitHash: a.Digest,
		Description: a.Description, Metadata: a.Metadata, VersionIndex: versionIndex, DigestAlgorithm: "MANIFEST_MD5",
		CreatedAt: wandb.FormatTime(a.CreatedAt), UpdatedAt: wandb.FormatTime(a.UpdatedAt),
		TTLDurationSeconds: -1, TTLIsInherited: true,
		Aliases: aliases, ArtifactType: gqlNodeRef{ID: wandb.GlobalID("ArtifactType", a.Entity+"/"+a.Project+"/"+a.Type), Name: a.Type},
		ArtifactSequence: seq, ArtifactCollection: seq, SourceCollection: seq,
		ArtifactMemberships: lazy(func() (gqlMembershipConnection, error) {
			return gqlMembershipConnection{Edges: []gqlMembershipEdge{{Node: membershipObj(c, a)}}}, nil
		}),
		CreatedBy: gqlRunRef{ID: wandb.GlobalID("Run", a.Entity+"/"+a.Project+"/"+a.RunName), Name: a.RunName,
			Project: projectInfo(c, a.Entity, a.Project)},
	}
	o.CurrentManifest = lazy(func() (*gqlManifestRef, error) {
		if a.ManifestMD5 == "" {
			return nil, nil
		}
		return &gqlManifestRef{ID: wandb.GlobalID("ArtifactManifest", a.ID), File: gqlManifestFile{ID: wandb.GlobalID("File", a.ID+"/wandb_manifest.json"),
			DirectURL: c.fileURL(a.Entity, a.ID, a.ManifestMD5, "wandb_manifest.json")}}, nil
	})
	counts := func(size bool) fieldFn {
		return lazy(func() (int64, error) {
			m, err := c.wb.Manifest(c.ctx, a)
			if err != nil {
				return 0, nil // not uploaded yet
			}
			if size {
				return m.Size(), nil
			}
			return int64(len(m.Contents)), nil
		})
	}
	o.Size, o.FileCount = counts(true), counts(false)
	files := field(func(args filesArgs) (*gqlFileConnection, error) {
		m, err := c.wb.Manifest(c.ctx, a)
		if err != nil {
			return nil, gqlErrorf("artifact %s: its manifest is missing", a.Collection)
		}
		want := map[string]bool{}
		for _, n := range args.Names {
			want[n] = true
		}
		for _, e := range args.Entries {
			if e.Name != nil {
				want[*e.Name] = true
			}
		}
		names := make([]string, 0, len(m.Contents))
		for n := range m.Contents {
			if len(want) == 0 || want[n] {
				names = append(names, n)
			}
		}
		sort.Strings(names)
		edges := make([]gqlFileEdge, len(names))
		for i, n := range names {
			e := m.Contents[n]
			hexd := wandb.MD5Hex(e.Digest)
			edges[i] = gqlFileEdge{Node: gqlFile{ID: wandb.GlobalID("File", a.ID+"/"+n), Name: n, Digest: hexd, MD5: e.Digest,
				SizeBytes: e.Size, DirectURL: c.fileURL(a.Entity, a.ID, hexd, n), URL: c.fileURL(a.Entity, a.ID, hexd, n)}}
		}
		return &gqlFileConnection{Edges: edges, TotalCount: len(names)}, nil
	})
	o.Files = files
	o.FilesByManifestEntries = files
	return o
}

// membershipObj is an artifact version as a member of its collection (W&B links a version
// into other collections too; Hone's versions belong to their own collection only).
func membershipObj(c *gqlCtx, a wandb.Artifact) gqlMembership {
	o := artifactObj(c, a)
	return gqlMembership{ID: a.ID, VersionIndex: o.VersionIndex, CreatedAt: o.CreatedAt,
		Aliases: o.Aliases, ArtifactCollection: o.ArtifactCollection, Artifact: o, Files: o.Files}
}

func (c *gqlCtx) artifact(id string) (wandb.Artifact, error) {
	ws, err := c.store()
	if err != nil {
		return wandb.Artifact{}, err
	}
	a, err := ws.ArtifactByID(c.ctx, c.entity, id)
	if errors.Is(err, wandb.ErrNotFound) {
		return a, gqlErrorf("artifact %s not found", id)
	}
	return a, err
}

func rootArtifact(c *gqlCtx, args idArgs) (*gqlArtifact, error) {
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	a, err := ws.ArtifactByID(c.ctx, c.entity, args.ID)
	if errors.Is(err, wandb.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	o := artifactObj(c, a)
	return &o, nil
}

func rootArtifactCollectionByID(c *gqlCtx, args idArgs) (*gqlArtifactSequence, error) {
	raw, err := base64.StdEncoding.DecodeString(args.ID)
	key, ok := strings.CutPrefix(string(raw), "ArtifactSequence:")
	parts := strings.Split(key, "/")
	if err != nil || !ok || len(parts) != 3 || parts[0] != c.entity {
		return nil, nil
	}
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	t, err := ws.CollectionType(c.ctx, parts[0], parts[1], parts[2])
	if err != nil {
		return nil, nil
	}
	o := collectionObj(c, parts[0], parts[1], parts[2], t)
	return &o, nil
}

// aliasNames are the non-empty aliases of an input.
func aliasNames(in []aliasInput) []string {
	var out []string
	for _, al := range in {
		if al.Alias != "" {
			out = append(out, al.Alias)
		}
	}
	return out
}

func rootCreateArtifact(c *gqlCtx, args inputArgs[createArtifactInput]) (*gqlArtifactPayload, error) {
	in := args.Input
	entity, err := c.own(in.EntityName)
	if err != nil {
		return nil, err
	}
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	names := in.ArtifactCollectionNames
	if n := in.ArtifactCollectionName; n != "" && len(names) == 0 {
		names = []string{n}
	}
	if len(names) != 1 {
		return nil, gqlErrorf("createArtifact: give the artifact's name (artifactCollectionName)")
	}
	a, err := ws.CreateArtifact(c.ctx, wandb.CreateInput{Entity: entity, Project: in.ProjectName, Type: in.ArtifactTypeName,
		Collection: names[0], Digest: in.Digest, Description: in.Description, Metadata: in.Metadata,
		RunName: in.RunName, Aliases: aliasNames(in.Aliases)})
	if err != nil {
		return nil, err
	}
	return &gqlArtifactPayload{Artifact: artifactObj(c, a)}, nil
}

func manifestPayload(c *gqlCtx, a wandb.Artifact) (*gqlManifestPayload, error) {
	token, err := c.wb.NewUpload(c.ctx, wandb.Upload{Entity: a.Entity, Kind: wandb.UploadManifest, ArtifactID: a.ID})
	if err != nil {
		return nil, err
	}
	return &gqlManifestPayload{ArtifactManifest: gqlManifestUpload{ID: wandb.GlobalID("ArtifactManifest", a.ID), File: gqlFileUpload{
		ID: wandb.GlobalID("File", a.ID+"/wandb_manifest.json"), UploadURL: c.uploadURL(token)}}}, nil
}

func rootCreateArtifactManifest(c *gqlCtx, args inputArgs[artifactInput]) (*gqlManifestPayload, error) {
	if _, err := c.own(args.Input.EntityName); err != nil {
		return nil, err
	}
	a, err := c.artifact(args.Input.ArtifactID)
	if err != nil {
		return nil, err
	}
	return manifestPayload(c, a)
}

func rootUpdateArtifactManifest(c *gqlCtx, args inputArgs[updateArtifactManifestInput]) (*gqlManifestPayload, error) {
	in := args.Input
	raw, _ := base64.StdEncoding.DecodeString(in.ArtifactManifestID)
	id, ok := strings.CutPrefix(string(raw), "ArtifactManifest:")
	if !ok {
		return nil, gqlErrorf("artifact manifest %s not found", in.ArtifactManifestID)
	}
	a, err := c.artifact(id)
	if err != nil {
		return nil, err
	}
	return manifestPayload(c, a)
}

func rootCreateArtifactFiles(c *gqlCtx, args inputArgs[createArtifactFilesInput]) (*gqlCreateArtifactFilesPayload, error) {
	ws, err := c.store()
	if err != nil {
		return nil, err
	}
	var edges []gqlArtifactFileEdge
	for _, f := range args.Input.ArtifactFiles {
		a, err := c.artifact(f.ArtifactID)
		if err != nil {
			return nil, err
		}
		hexd := wandb.MD5Hex(f.MD5)
		if hexd == "" {
			return nil, gqlErrorf("createArtifactFiles: file %s: md5 %q is not a base64 MD5", f.Name, f.MD5)
		}
		var upload *string
		if _, err := ws.BlobPath(a.Entity, hexd); err != nil { // not stored yet
			token, err := ws.NewUpload(c.ctx, wandb.Upload{Entity: a.Entity, Kind: wandb.UploadFile, ArtifactID: a.ID, MD5: f.MD5})
			if err != nil {
				return nil, err
			}
			u := c.uploadURL(token)
			upload = &u
		}
		edges = append(edges, gqlArtifactFileEdge{Node: gqlArtifactFileUpload{ID: wandb.GlobalID("File", a.ID+"/"+f.Name), Name: f.Name,
			StoragePath: a.Entity + "/" + hexd, UploadURL: upload, Artifact: gqlIDRef{ID: a.ID}}})
	}
	return &gqlCreateArtifactFilesPayload{Files: gqlArtifactFileConnection{Edges: edges}}, nil
}

func rootCommitArtifact(c *gqlCtx, args inputArgs[artifactInput]) (*gqlArtifactPayload, error) {
	a, err := c.artifact(args.Input.ArtifactID)
	if err != nil {
		return nil, err
	}
	a, err = c.wb.CommitArtifact(c.ctx, a.Entity, a.ID)
	if err != nil {
		return nil, err
	}
	return &gqlArtifactPayload{Artifact: artifactObj(c, a)}, nil
}

func rootUseArtifact(c *gqlCtx, args inputArgs[artifactInput]) (*gqlArtifactPayload, error) {
	if _, err := c.own(args.Input.EntityName); err != nil {
		return nil, err
	}
	a, err := c.artifact(args.Input.ArtifactID)
	if err != nil {
		return nil, err
	}
	return &gqlArtifactPayload{Artifact: artifactObj(c, a)}, nil
}

func rootUpdateArtifact(c *gqlCtx, args inputArgs[updateArtifactInput]) (*gqlArtifactPayload, error) {
	in := args.Input
	a, err := c.artifact(in.ArtifactID)
	if err != nil {
		return nil, err
	}
	a, err = c.wb.UpdateArtifact(c.ctx, a.Entity, a.ID, in.Metadata, in.Description, aliasNames(in.Aliases))
	if err != nil {
		return nil, err
	}
	return &gqlArtifactPayload{Artifact: artifactObj(c, a)}, nil
}

func rootDeleteArtifact(*gqlCtx, noArgs) (any, error) {
	return nil, gqlErrorf("deleteArtifact: Hone does not delete W&B artifacts")
}
