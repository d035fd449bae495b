package otlp

import (
	"context"
	"testing"

	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/honeai/hone/internal/db/dbtest"
)

// BenchmarkExport decodes and writes an export of 512 OpenInference chat spans (the Python
// SDK's default batch) on SQLite; spans/s is reported.
func BenchmarkExport(b *testing.B) {
	g := newIngester(b, dbtest.SQLite(b))
	ctx := context.Background()
	var bodies [][]byte
	for i := range b.N {
		var spans []*tracepb.Span
		for j := range 512 {
			sp := openInferenceChat(byte(i%250+1), byte(j%250+1), 0)
			sp.SpanId = []byte{0, 0, 0, byte(i >> 8), byte(i), byte(j >> 8), byte(j), 1}
			spans = append(spans, sp)
		}
		body, _ := proto.Marshal(traces(kvs("wandb.project", "bench"), spans...))
		bodies = append(bodies, body)
	}
	b.SetBytes(int64(len(bodies[0])))
	b.ResetTimer()
	for i := range b.N {
		data, err := Decode(bodies[i], Protobuf)
		if err != nil {
			b.Fatal(err)
		}
		if res, err := g.Export(ctx, data, request("")); err != nil || res.Accepted != 512 {
			b.Fatalf("%+v %v", res, err)
		}
	}
	b.ReportMetric(float64(512*b.N)/b.Elapsed().Seconds(), "spans/s")
}
