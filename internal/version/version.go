// Package version reports the version and commit of the running binary.
package version

import "runtime/debug"

// Version is the release version; overridden at build time with
// -ldflags "-X github.com/honeai/hone/internal/version.Version=...".
var Version = "0.1.0-dev"

// Commit is the VCS commit; set at build time with -ldflags
// "-X github.com/honeai/hone/internal/version.Commit=$(git rev-parse --short HEAD)".
// When empty, the commit recorded by the Go toolchain (if any) is used.
var Commit = ""

// CommitOrUnknown returns the commit the binary was built from, or "unknown".
func CommitOrUnknown() string {
	if Commit != "" {
		return Commit
	}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				if len(s.Value) > 12 {
					return s.Value[:12]
				}
				return s.Value
			}
		}
	}
	return "unknown"
}

// String is "hone <version> (commit <commit>)".
func String() string {
	return "hone " + Version + " (commit " + CommitOrUnknown() + ")"
}
