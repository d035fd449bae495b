package wandbapi

import "reflect"

// The arguments of the fields Hone answers, decoded into structs named after W&B's input
// types. GraphQL gives a field's arguments as JSON-like values (variables substituted);
// decodeArgs sets the struct's fields from them by their json tags, matched exactly.

// decodeArgs sets the fields of the struct dst points to from a field's arguments. It is as
// lenient as the old W&B clients need and no more: a value of another type than its field's
// is left out (a string field takes only a string, a *string only a string, a list of strings
// only its strings, a list of objects only its objects, a struct only an object), an any
// field takes the value as sent, and arguments with no field are ignored.
func decodeArgs(args map[string]any, dst any) {
	decodeObject(args, reflect.ValueOf(dst).Elem())
}

func decodeObject(m map[string]any, v reflect.Value) {
	for name, idx := range fieldIndexes(v.Type()) {
		if a, ok := m[name]; ok {
			decodeValue(a, v.FieldByIndex(idx))
		}
	}
}

// decodeValue sets v from a when a has v's type and says whether it did.
func decodeValue(a any, v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Interface:
		if a == nil {
			return false
		}
		v.Set(reflect.ValueOf(a))
	case reflect.String:
		s, ok := a.(string)
		if !ok {
			return false
		}
		v.SetString(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		if !decodeValue(a, p.Elem()) {
			return false
		}
		v.Set(p)
	case reflect.Struct:
		m, ok := a.(map[string]any)
		if !ok {
			return false
		}
		decodeObject(m, v)
	case reflect.Slice:
		list, ok := a.([]any)
		if !ok {
			return false
		}
		for _, item := range list {
			e := reflect.New(v.Type().Elem()).Elem()
			if decodeValue(item, e) {
				v.Set(reflect.Append(v, e))
			}
		}
	default:
		return false
	}
	return true
}

// root makes a root field's function from one that takes its arguments decoded into A.
func root[A, R any](fn func(c *gqlCtx, args A) (R, error)) rootFn {
	return func(c *gqlCtx, m map[string]any) (any, error) {
		var a A
		decodeArgs(m, &a)
		return fn(c, a)
	}
}

// field makes a field function from one that takes its arguments decoded into A.
func field[A, R any](fn func(args A) (R, error)) fieldFn {
	return func(m map[string]any) (any, error) {
		var a A
		decodeArgs(m, &a)
		return fn(a)
	}
}

// lazy makes a field function of a field without arguments, computed only when selected.
func lazy[R any](fn func() (R, error)) fieldFn {
	return func(map[string]any) (any, error) { return fn() }
}

// noArgs are the arguments of a field that takes none.
type noArgs struct{}

// nameArgs are the arguments of a field that finds something by name (bucket, run, artifact,
// artifactType, artifactCollection, ...).
type nameArgs struct {
	Name string `json:"name"`
}

// idArgs are the arguments of a field that finds something by id.
type idArgs struct {
	ID string `json:"id"`
}

// inputArgs are the arguments of a mutation: its input object.
type inputArgs[T any] struct {
	Input T `json:"input"`
}

// entityArgs are entity's: the entity's name under either name (the key's when neither).
type entityArgs struct {
	Name       string `json:"name"`
	EntityName string `json:"entityName"`
}

// projectArgs are project's (and model's): the entity (the key's when empty) and the name.
type projectArgs struct {
	EntityName string `json:"entityName"`
	Name       string `json:"name"`
}

// keysArgs are a run's wandbConfig's: the keys to keep (all when none).
type keysArgs struct {
	Keys []string `json:"keys"`
}

// membershipArgs are an artifact collection's artifactMembership's.
type membershipArgs struct {
	AliasName string `json:"aliasName"`
}

// filesArgs are an artifact's files' and filesByManifestEntries': the files to list (all when
// neither names nor entries name any).
type filesArgs struct {
	Names   []string `json:"names"`
	Entries []struct {
		Name *string `json:"name"`
	} `json:"entries"`
}

// entityInput is an input that names only the entity (markRunFilesUploaded).
type entityInput struct {
	EntityName string `json:"entityName"`
}

// upsertModelInput is upsertModel's input (W&B's UpsertModelInput).
type upsertModelInput struct {
	EntityName  string `json:"entityName"`
	Name        string `json:"name"`
	Description any    `json:"description"` // answered back as sent
}

// upsertBucketInput is upsertBucket's input (W&B's UpsertBucketInput).
type upsertBucketInput struct {
	EntityName     string `json:"entityName"`
	ModelName      string `json:"modelName"` // the project
	Name           string `json:"name"`
	DisplayName    string `json:"displayName"`
	JobType        string `json:"jobType"`
	Config         string `json:"config"`
	SummaryMetrics string `json:"summaryMetrics"`
	State          string `json:"state"`
}

// createRunFilesInput is createRunFiles' input.
type createRunFilesInput struct {
	EntityName  string   `json:"entityName"`
	ProjectName string   `json:"projectName"`
	RunName     string   `json:"runName"`
	Files       []string `json:"files"`
}

// aliasInput is an alias of createArtifact's and updateArtifact's inputs.
type aliasInput struct {
	Alias string `json:"alias"`
}

// createArtifactInput is createArtifact's input (W&B's CreateArtifactInput).
type createArtifactInput struct {
	EntityName              string       `json:"entityName"`
	ProjectName             string       `json:"projectName"`
	ArtifactTypeName        string       `json:"artifactTypeName"`
	ArtifactCollectionName  string       `json:"artifactCollectionName"`
	ArtifactCollectionNames []string     `json:"artifactCollectionNames"`
	Digest                  string       `json:"digest"`
	Description             string       `json:"description"`
	Metadata                string       `json:"metadata"`
	RunName                 string       `json:"runName"`
	Aliases                 []aliasInput `json:"aliases"`
}

// artifactInput names an artifact, with the entity the client believes it has
// (createArtifactManifest, useArtifact, commitArtifact).
type artifactInput struct {
	EntityName string `json:"entityName"`
	ArtifactID string `json:"artifactID"`
}

// updateArtifactManifestInput is updateArtifactManifest's input.
type updateArtifactManifestInput struct {
	ArtifactManifestID string `json:"artifactManifestID"`
}

// artifactFileInput is one file of createArtifactFiles' input.
type artifactFileInput struct {
	ArtifactID string `json:"artifactID"`
	Name       string `json:"name"`
	MD5        string `json:"md5"` // base64
}

// createArtifactFilesInput is createArtifactFiles' input.
type createArtifactFilesInput struct {
	ArtifactFiles []artifactFileInput `json:"artifactFiles"`
}

// updateArtifactInput is updateArtifact's input: nil metadata or description keeps them.
type updateArtifactInput struct {
	ArtifactID  string       `json:"artifactID"`
	Metadata    *string      `json:"metadata"`
	Description *string      `json:"description"`
	Aliases     []aliasInput `json:"aliases"`
}
