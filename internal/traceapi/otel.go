package traceapi

import (
	"bytes"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"

	"github.com/honeai/hone/internal/apierror"
	"github.com/honeai/hone/internal/auth"
	"github.com/honeai/hone/internal/httpx"
	"github.com/honeai/hone/internal/openapi"
	"github.com/honeai/hone/internal/otlp"
)

// OTelPath is Weave's OTLP/HTTP trace route.
const OTelPath = "/otel/v1/traces"

// OTelKeyHeader is the header Weave's OTLP route takes the API key in.
const OTelKeyHeader = "wandb-api-key"

// OTelExportRequest documents the route's body in the OpenAPI document: OTLP's
// ExportTraceServiceRequest, as protobuf (application/x-protobuf) or OTLP JSON.
type OTelExportRequest struct {
	ResourceSpans []map[string]any `json:"resourceSpans"`
}

// OTelExportResponse is the answer: OTLP's ExportTraceServiceResponse, in the request's
// encoding; partialSuccess only when spans were rejected.
type OTelExportResponse struct {
	PartialSuccess *struct {
		RejectedSpans string `json:"rejectedSpans"`
		ErrorMessage  string `json:"errorMessage"`
	} `json:"partialSuccess,omitempty"`
}

// RegisterOTel adds POST /otel/v1/traces (OTLP/HTTP traces into the trace store, as Weave
// serves it) behind authn (httpx.AuthenticateAny with OTelKeyHeader). maxBody bounds the body
// once a gzip or deflate Content-Encoding is undone, as --max-body-bytes bounds it on the wire.
func RegisterOTel(r *httpx.Router, authn httpx.Middleware, ing *otlp.Ingester, maxBody int64) {
	g := r.Group(authn).Secured(openapi.BasicAuth)
	g.HandleFunc("POST "+OTelPath, func(w http.ResponseWriter, req *http.Request) {
		serveOTel(w, req, ing, maxBody)
	}, &openapi.Operation{Summary: "Take OpenTelemetry traces (OTLP/HTTP, protobuf or JSON, gzip or deflate) as calls", Tags: []string{"tracing"},
		Description: "The key in the wandb-api-key header, or Authorization Basic or Bearer. Spans go to the project their resource names " +
			"(wandb.entity and wandb.project) or to the project_id header's. Rejected spans are answered in partialSuccess (OTLP).",
		Security: openapi.BasicAuth, Request: OTelExportRequest{}, Response: OTelExportResponse{}, ResponseContentType: "application/x-protobuf",
		Params: []openapi.Param{{Name: "project_id", In: "header", Type: "string", Description: "<entity>/<project> of spans whose resource names none"}}})
}

func serveOTel(w http.ResponseWriter, r *http.Request, ing *otlp.Ingester, maxBody int64) {
	enc := otlp.Protobuf
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		switch {
		case err != nil:
			writeUnsupported(w, "Content-Type", "Content-Type is not a media type")
			return
		case mt == "application/x-protobuf" || mt == "application/protobuf":
		case mt == "application/json":
			enc = otlp.JSON
		default:
			writeUnsupported(w, "Content-Type", "Unsupported Media Type: OTLP/HTTP takes application/x-protobuf or application/json")
			return
		}
	}
	body, err := httpx.ReadBody(r)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	if body, err = decompress(body, r.Header.Get("Content-Encoding"), maxBody); err != nil {
		apierror.Write(w, r, err)
		return
	}
	data, err := otlp.Decode(body, enc)
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	p, _ := auth.FromContext(r.Context())
	res, err := ing.Export(r.Context(), data, otlp.Request{Entity: p.Entity, ProjectHeader: strings.TrimSpace(r.Header.Get("project_id")),
		Authorize: authorizer(r.Context())})
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	out := &coltrace.ExportTraceServiceResponse{}
	if res.Rejected > 0 {
		out.PartialSuccess = &coltrace.ExportTracePartialSuccess{RejectedSpans: res.Rejected, ErrorMessage: res.Message}
	}
	var b []byte
	if enc == otlp.JSON {
		b, err = protojson.Marshal(out)
		w.Header().Set("Content-Type", "application/json")
	} else {
		b, err = proto.Marshal(out)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}
	if err != nil {
		apierror.Write(w, r, err)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func writeUnsupported(w http.ResponseWriter, param, msg string) {
	apierror.WriteError(w, apierror.New(http.StatusUnsupportedMediaType, apierror.TypeBadRequest, param, msg))
}

// decompress undoes a gzip or deflate Content-Encoding, reading at most max bytes of the
// result: more is a 413, a stream that is not what it says a 400.
func decompress(body []byte, encoding string, max int64) ([]byte, error) {
	var zr io.ReadCloser
	var err error
	switch strings.ToLower(strings.TrimSpace(encoding)) {
	case "", "identity":
		return body, nil
	case "gzip", "x-gzip":
		zr, err = gzip.NewReader(bytes.NewReader(body))
	case "deflate":
		zr, err = zlib.NewReader(bytes.NewReader(body))
	default:
		return nil, apierror.New(http.StatusUnsupportedMediaType, apierror.TypeBadRequest, "Content-Encoding",
			"Unsupported Content-Encoding: OTLP/HTTP takes gzip, deflate or none")
	}
	if err != nil {
		return nil, apierror.BadRequest("Content-Encoding", "The body is not %s data: %v", encoding, err)
	}
	defer zr.Close()
	var buf bytes.Buffer
	n, err := buf.ReadFrom(io.LimitReader(zr, max+1))
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.Is(err, zlib.ErrChecksum) {
			return nil, apierror.BadRequest("Content-Encoding", "The body is not whole %s data: %v", encoding, err)
		}
		return nil, apierror.BadRequest("Content-Encoding", "The body is not %s data: %v", encoding, err)
	}
	if n > max {
		return nil, apierror.TooLarge("Request body is larger than the limit of %d bytes once decompressed", max)
	}
	return buf.Bytes(), nil
}
