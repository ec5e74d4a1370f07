package main

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data (and the metadata needed to read it back),
// as bbolt does on Linux at every commit.
func fdatasync(f *os.File) error { return syscall.Fdatasync(int(f.Fd())) }
