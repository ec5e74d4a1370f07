//go:build unix

package main

import "syscall"

// openFilesLimit returns the process's soft limit of open files.
func openFilesLimit() (uint64, bool) {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil {
		return 0, false
	}
	return uint64(r.Cur), true
}
