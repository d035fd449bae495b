package wandbapi

// The objects Hone answers W&B GraphQL fields with, named after W&B's types. Each holds the
// fields Hone answers (a field it does not hold is null); fieldFn fields are computed only
// when selected. The executor (exec.go) reads them by their json tags; they are not
// marshalled whole.

// gqlEmptyConnection is a connection Hone keeps nothing in (a user's teams, an entity's
// projects, a collection's tags and aliases).
type gqlEmptyConnection struct {
	Edges []struct{} `json:"edges"`
}

// gqlPageInfo is the page info of a connection answered whole.
type gqlPageInfo struct {
	HasNextPage bool    `json:"hasNextPage"`
	EndCursor   *string `json:"endCursor"` // null
}

func (gqlPageInfo) typename() string { return "PageInfo" }

// gqlNodeRef is an object named by its id and name (a user's default entity, an artifact's
// type).
type gqlNodeRef struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// gqlIDRef is an object named by its id.
type gqlIDRef struct {
	ID string `json:"id"`
}

// gqlTypeRef is an artifact type named by its name.
type gqlTypeRef struct {
	Name string `json:"name"`
}

// gqlUser is viewer: the key's entity as a user.
type gqlUser struct {
	ID            string             `json:"id"`
	Username      string             `json:"username"`
	Name          string             `json:"name"`
	Entity        string             `json:"entity"`
	Email         *string            `json:"email"` // null
	Admin         bool               `json:"admin"`
	Flags         string             `json:"flags"`
	DefaultEntity gqlNodeRef         `json:"defaultEntity"`
	Teams         gqlEmptyConnection `json:"teams"`
}

func (gqlUser) typename() string { return "User" }

// gqlServerInfo is serverInfo.
type gqlServerInfo struct {
	FrontendHost             string     `json:"frontendHost"`
	LatestLocalVersionInfo   *struct{}  `json:"latestLocalVersionInfo"`   // null
	CLIVersionInfo           *struct{}  `json:"cliVersionInfo"`           // null
	Features                 []struct{} `json:"features"`                 // none
	AvailableBucketProviders []string   `json:"availableBucketProviders"` // none
	ExportBucketInfo         *struct{}  `json:"exportBucketInfo"`         // null
}

// gqlEntity is an entity (read-only when it is not the key's).
type gqlEntity struct {
	ID                   string             `json:"id"`
	Name                 string             `json:"name"`
	ReadOnly             bool               `json:"readOnly"`
	IsTeam               bool               `json:"isTeam"`
	XxhashDigestsEnabled bool               `json:"xxhashDigestsEnabled"`
	Organization         *struct{}          `json:"organization"` // null
	DefaultAccess        string             `json:"defaultAccess"`
	Projects             gqlEmptyConnection `json:"projects"`
}

func (gqlEntity) typename() string { return "Entity" }

// gqlProjectRef is a project as a run or an artifact names it.
type gqlProjectRef struct {
	ID         string    `json:"id"`
	InternalID string    `json:"internalId"`
	Name       string    `json:"name"`
	EntityName string    `json:"entityName"`
	Entity     gqlEntity `json:"entity"`
}

func (gqlProjectRef) typename() string { return "Project" }

// gqlProject is a project as project, model and upsertModel answer it: runs and artifacts
// are found through it by name.
type gqlProject struct {
	gqlProjectRef
	ReadOnly    bool `json:"readOnly"`
	Description any  `json:"description"` // upsertModel's, as sent; null otherwise
	// Bucket and Run find a run (*gqlRun) by name.
	Bucket fieldFn `json:"bucket"`
	Run    fieldFn `json:"run"`
	// Artifact and ArtifactCollectionMembership find a version by "collection:version".
	Artifact                     fieldFn `json:"artifact"`
	ArtifactCollectionMembership fieldFn `json:"artifactCollectionMembership"`
	// ArtifactCollection and ArtifactSequence find a collection by name.
	ArtifactCollection fieldFn `json:"artifactCollection"`
	ArtifactSequence   fieldFn `json:"artifactSequence"`
	ArtifactType       fieldFn `json:"artifactType"` // a gqlArtifactType by name
}

// gqlArtifactType is an artifact type of a project.
type gqlArtifactType struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// ArtifactCollection and ArtifactSequence find a collection of this type by name.
	ArtifactCollection  fieldFn            `json:"artifactCollection"`
	ArtifactSequence    fieldFn            `json:"artifactSequence"`
	ArtifactCollections gqlEmptyConnection `json:"artifactCollections"`
}

func (gqlArtifactType) typename() string { return "ArtifactType" }

// gqlRun is a run ("bucket" in W&B's API).
type gqlRun struct {
	ID               string        `json:"id"`
	Name             string        `json:"name"`
	DisplayName      string        `json:"displayName"`
	Description      string        `json:"description"`
	Notes            *string       `json:"notes"` // null
	Config           string        `json:"config"`
	SummaryMetrics   string        `json:"summaryMetrics"`
	State            string        `json:"state"`
	JobType          string        `json:"jobType"`
	SweepName        *string       `json:"sweepName"` // null
	Group            *string       `json:"group"`     // null
	Tags             []string      `json:"tags"`      // none
	HistoryLineCount int           `json:"historyLineCount"`
	LogLineCount     int           `json:"logLineCount"`
	EventsLineCount  int           `json:"eventsLineCount"`
	HistoryTail      string        `json:"historyTail"` // the last history line, as a JSON list of strings
	EventsTail       string        `json:"eventsTail"`
	CreatedAt        string        `json:"createdAt"`
	HeartbeatAt      string        `json:"heartbeatAt"`
	Project          gqlProjectRef `json:"project"`
	WandbConfig      fieldFn       `json:"wandbConfig"` // the SDK's part of the config, by keys
	History          fieldFn       `json:"history"`     // every history line, as JSON strings
}

func (gqlRun) typename() string { return "Run" }

// gqlRunRef is the run that created an artifact.
type gqlRunRef struct {
	ID      string        `json:"id"`
	Name    string        `json:"name"`
	Project gqlProjectRef `json:"project"`
}

func (gqlRunRef) typename() string { return "Run" }

// gqlUpsertBucketPayload is upsertBucket's answer.
type gqlUpsertBucketPayload struct {
	Bucket   gqlRun `json:"bucket"`
	Inserted bool   `json:"inserted"`
}

// gqlUpsertModelPayload is upsertModel's answer (the project under both names).
type gqlUpsertModelPayload struct {
	Model    gqlProject `json:"model"`
	Project  gqlProject `json:"project"`
	Inserted bool       `json:"inserted"`
}

// gqlRunFileUpload is where one file of createRunFiles is uploaded.
type gqlRunFileUpload struct {
	Name      string `json:"name"`
	UploadURL string `json:"uploadUrl"`
}

// gqlCreateRunFilesPayload is createRunFiles' answer.
type gqlCreateRunFilesPayload struct {
	RunID         string             `json:"runID"`
	UploadHeaders []string           `json:"uploadHeaders"` // none
	Files         []gqlRunFileUpload `json:"files"`
}

// gqlSuccessPayload is the answer of a mutation with nothing to do (markRunFilesUploaded).
type gqlSuccessPayload struct {
	Success bool `json:"success"`
}

// gqlArtifactSequence is an artifact collection (W&B's ArtifactSequence; the interface
// ArtifactCollection in fragments).
type gqlArtifactSequence struct {
	ID                  string             `json:"id"`
	Name                string             `json:"name"`
	Description         *string            `json:"description"` // null
	DigestAlgorithm     string             `json:"digestAlgorithm"`
	CreatedAt           *string            `json:"createdAt"` // null
	Tags                gqlEmptyConnection `json:"tags"`
	Project             gqlProjectRef      `json:"project"`
	DefaultArtifactType gqlTypeRef         `json:"defaultArtifactType"`
	Type                gqlTypeRef         `json:"type"`
	LatestArtifact      fieldFn            `json:"latestArtifact"` // *gqlArtifact
	// Artifacts and ArtifactMemberships are the versions (gqlVersionConnection).
	Artifacts           fieldFn            `json:"artifacts"`
	ArtifactMemberships fieldFn            `json:"artifactMemberships"`
	ArtifactMembership  fieldFn            `json:"artifactMembership"` // a version by alias
	Aliases             gqlEmptyConnection `json:"aliases"`
}

func (gqlArtifactSequence) typename() string { return "ArtifactSequence" }

// gqlSequenceRef is the collection an alias belongs to.
type gqlSequenceRef struct {
	ID      string        `json:"id"`
	Name    string        `json:"name"`
	Project gqlProjectRef `json:"project"`
}

func (gqlSequenceRef) typename() string { return "ArtifactSequence" }

// gqlVersionEdge is one version of a collection.
type gqlVersionEdge struct {
	Node    gqlArtifact `json:"node"`
	Cursor  string      `json:"cursor"`
	Version string      `json:"version"`
}

// gqlVersionConnection is a collection's versions, all on one page.
type gqlVersionConnection struct {
	TotalCount int              `json:"totalCount"`
	Edges      []gqlVersionEdge `json:"edges"`
	PageInfo   gqlPageInfo      `json:"pageInfo"`
}

// gqlArtifactAlias is an alias of a version.
type gqlArtifactAlias struct {
	ID                 string         `json:"id"`
	Alias              string         `json:"alias"`
	ArtifactCollection gqlSequenceRef `json:"artifactCollection"`
}

func (gqlArtifactAlias) typename() string { return "ArtifactAlias" }

// gqlArtifact is an artifact version.
type gqlArtifact struct {
	ID                 string             `json:"id"`
	State              string             `json:"state"`
	Digest             string             `json:"digest"`
	CommitHash         string             `json:"commitHash"`
	Description        string             `json:"description"`
	Metadata           string             `json:"metadata"`     // a JSON object
	VersionIndex       *int               `json:"versionIndex"` // null until committed
	DigestAlgorithm    string             `json:"digestAlgorithm"`
	CreatedAt          string             `json:"createdAt"`
	UpdatedAt          string             `json:"updatedAt"`
	TTLDurationSeconds int                `json:"ttlDurationSeconds"`
	TTLIsInherited     bool               `json:"ttlIsInherited"`
	HistoryStep        *int               `json:"historyStep"` // null
	Tags               []struct{}         `json:"tags"`        // none
	Aliases            []gqlArtifactAlias `json:"aliases"`
	ArtifactType       gqlNodeRef         `json:"artifactType"`
	// ArtifactSequence, ArtifactCollection and SourceCollection are its own collection.
	ArtifactSequence    gqlArtifactSequence `json:"artifactSequence"`
	ArtifactCollection  gqlArtifactSequence `json:"artifactCollection"`
	SourceCollection    gqlArtifactSequence `json:"sourceCollection"`
	ArtifactMemberships fieldFn             `json:"artifactMemberships"` // gqlMembershipConnection
	CreatedBy           gqlRunRef           `json:"createdBy"`
	CurrentManifest     fieldFn             `json:"currentManifest"` // *gqlManifestRef
	Size                fieldFn             `json:"size"`            // of its files, once its manifest is uploaded
	FileCount           fieldFn             `json:"fileCount"`
	// Files and FilesByManifestEntries list its files (gqlFileConnection).
	Files                  fieldFn `json:"files"`
	FilesByManifestEntries fieldFn `json:"filesByManifestEntries"`
}

func (gqlArtifact) typename() string { return "Artifact" }

// gqlMembership is a version as a member of its collection (W&B links a version into other
// collections too; Hone's versions belong to their own collection only).
type gqlMembership struct {
	ID                 string              `json:"id"`
	VersionIndex       *int                `json:"versionIndex"`
	CreatedAt          string              `json:"createdAt"`
	Aliases            []gqlArtifactAlias  `json:"aliases"`
	ArtifactCollection gqlArtifactSequence `json:"artifactCollection"`
	Artifact           gqlArtifact         `json:"artifact"`
	Files              fieldFn             `json:"files"`
}

func (gqlMembership) typename() string { return "ArtifactCollectionMembership" }

// gqlMembershipEdge and gqlMembershipConnection list a version's memberships.
type gqlMembershipEdge struct {
	Node gqlMembership `json:"node"`
}

// gqlMembershipConnection is an artifact's artifactMemberships: its own collection's.
type gqlMembershipConnection struct {
	Edges []gqlMembershipEdge `json:"edges"`
}

// gqlFile is a file of an artifact, with the signed URL it is downloaded from.
type gqlFile struct {
	ID          string  `json:"id"`
	Name        string  `json:"name"`
	Digest      string  `json:"digest"` // MD5, hex
	MD5         string  `json:"md5"`    // MD5, base64
	SizeBytes   int64   `json:"sizeBytes"`
	Mimetype    *string `json:"mimetype"`    // null
	StoragePath *string `json:"storagePath"` // null
	DirectURL   string  `json:"directUrl"`
	URL         string  `json:"url"`
}

func (gqlFile) typename() string { return "File" }

// gqlFileEdge is one file of a gqlFileConnection.
type gqlFileEdge struct {
	Node gqlFile `json:"node"`
}

// gqlFileConnection is an artifact's files, all on one page.
type gqlFileConnection struct {
	Edges      []gqlFileEdge `json:"edges"`
	PageInfo   gqlPageInfo   `json:"pageInfo"`
	TotalCount int           `json:"totalCount"`
}

// gqlManifestFile is an artifact's manifest file, with the signed URL it is downloaded from.
type gqlManifestFile struct {
	ID        string `json:"id"`
	DirectURL string `json:"directUrl"`
}

// gqlManifestRef is an artifact's currentManifest.
type gqlManifestRef struct {
	ID   string          `json:"id"`
	File gqlManifestFile `json:"file"`
}

// gqlFileUpload is where a manifest is uploaded.
type gqlFileUpload struct {
	ID            string   `json:"id"`
	UploadURL     string   `json:"uploadUrl"`
	UploadHeaders []string `json:"uploadHeaders"` // none
}

// gqlManifestUpload is the manifest of createArtifactManifest and updateArtifactManifest.
type gqlManifestUpload struct {
	ID   string        `json:"id"`
	File gqlFileUpload `json:"file"`
}

// gqlManifestPayload is createArtifactManifest's and updateArtifactManifest's answer.
type gqlManifestPayload struct {
	ArtifactManifest gqlManifestUpload `json:"artifactManifest"`
}

// gqlArtifactFileUpload is one file of createArtifactFiles: where to upload it, or no URL when
// the entity stores it already.
type gqlArtifactFileUpload struct {
	ID                  string    `json:"id"`
	Name                string    `json:"name"`
	StoragePath         string    `json:"storagePath"`
	UploadURL           *string   `json:"uploadUrl"` // null: stored already
	UploadHeaders       []string  `json:"uploadHeaders"`
	UploadMultipartUrls *struct{} `json:"uploadMultipartUrls"` // null
	Artifact            gqlIDRef  `json:"artifact"`
}

// gqlArtifactFileEdge is one file of gqlArtifactFileConnection.
type gqlArtifactFileEdge struct {
	Node gqlArtifactFileUpload `json:"node"`
}

// gqlArtifactFileConnection is createArtifactFiles' files.
type gqlArtifactFileConnection struct {
	Edges []gqlArtifactFileEdge `json:"edges"`
}

// gqlCreateArtifactFilesPayload is createArtifactFiles' answer.
type gqlCreateArtifactFilesPayload struct {
	Files gqlArtifactFileConnection `json:"files"`
}

// gqlArtifactPayload is the answer of the mutations of one artifact (createArtifact,
// commitArtifact, useArtifact, updateArtifact).
type gqlArtifactPayload struct {
	Artifact gqlArtifact `json:"artifact"`
}
