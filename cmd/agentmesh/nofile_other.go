//go:build !unix

package main

// openFilesLimit reports no limit where there is no RLIMIT_NOFILE.
func openFilesLimit() (uint64, bool) { return 0, false }
