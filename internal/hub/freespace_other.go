//go:build !unix

package hub

// freeSpace is not known here (-1): a full disk shows as a failed write instead.
func freeSpace(string) (int64, error) { return -1, nil }
