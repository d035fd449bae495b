// Package openapi builds Hone's OpenAPI 3.1 document from the routes registered with the
// router: each route carries an Operation that names its purpose, its authentication and the
// Go types of its request and response bodies, whose JSON Schemas are derived by reflection.
package openapi

// Security is the authentication a route requires.
type Security int

const (
	// NoAuth routes are public (health).
	NoAuth Security = iota
	// BearerAuth routes take `Authorization: Bearer <API key>` (training area).
	BearerAuth
	// BasicAuth routes take `Authorization: Basic base64(<username>:<API key>)` (tracing area).
	BasicAuth
)

// Param is a path, query or header parameter.
type Param struct {
	Name        string
	In          string // "path", "query" or "header"
	Description string
	Required    bool
	Type        string // JSON Schema type: "string", "integer", "boolean", "number"
}

// Content is a content type of a response and its schema: Schema is a value of its Go type
// (a JSON array of them when Array is set), or nil for text.
type Content struct {
	Type   string
	Schema any
	Array  bool
}

// Operation documents one route.
type Operation struct {
	Summary     string
	Description string
	Tags        []string
	Security    Security
	// Request is a value of the request body's Go type (nil: no body).
	Request any
	// RequestContentType defaults to application/json.
	RequestContentType string
	// Response is a value of the success body's Go type (nil: schema-less JSON).
	Response any
	// ResponseContentType defaults to application/json; for example text/event-stream,
	// application/jsonl or application/octet-stream.
	ResponseContentType string
	// Streams lists extra response content types (e.g. text/event-stream when `stream` is set).
	Streams []string
	// Answers lists other content types of the success response, chosen by the request's
	// Accept header, each with its schema.
	Answers []Content
	Params  []Param
}
