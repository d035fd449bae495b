package traceapi

// SetExportCap lowers the most calls an export answers (MaxExportCalls) for a test; the
// returned func restores it.
func SetExportCap(n int) (restore func()) {
	old := exportCap
	exportCap = n
	return func() { exportCap = old }
}
