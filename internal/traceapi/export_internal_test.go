package traceapi

import "testing"

// SetExportCap lowers the most calls an export answers (MaxExportCalls) for a test; the
// returned func restores it.
func SetExportCap(n int) (restore func()) {
	old := exportCap
	exportCap = n
	return func() { exportCap = old }
}

// TestExportFormat: the first export format by quality, ties in the header's order; JSON
// lines when none is named or all are refused (q=0).
func TestExportFormat(t *testing.T) {
	for accept, want := range map[string]string{
		"":                                 mediaJSONL,
		"*/*":                              mediaJSONL,
		"text/csv":                         mediaCSV,
		"text/tab-separated-values":        mediaTSV,
		"application/json":                 mediaJSON,
		"application/jsonl, text/csv":      mediaJSONL,
		"text/csv;q=0.5, application/json": mediaJSON,
		"text/csv;q=0":                     mediaJSONL,
		"text/html, text/csv;q=0.9":        mediaCSV,
		"text/csv;q=abc, text/tab-separated-values;q=0.8": mediaCSV,
		";;;, text/csv": mediaCSV,
	} {
		if got := exportFormat(accept); got != want {
			t.Errorf("exportFormat(%q) = %q, want %q", accept, got, want)
		}
	}
}

// FuzzExportFormat: any Accept header gives one of the four formats.
func FuzzExportFormat(f *testing.F) {
	for _, s := range []string{"", "text/csv", "text/csv;q=0.5, application/json", "a/b;q=1e400", "text/csv;q=NaN", ",,,"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		switch got := exportFormat(accept); got {
		case mediaJSONL, mediaJSON, mediaCSV, mediaTSV:
		default:
			t.Fatalf("exportFormat(%q) = %q", accept, got)
		}
	})
}
