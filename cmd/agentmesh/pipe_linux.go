//go:build linux

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// stdioPipeSize is the buffer asked of the kernel for a stdio pipe: a
// burst of discover answers (eight of about 17 KB) fits without the
// writers waiting for the host to read, where the default holds 64 KiB.
const stdioPipeSize = 1 << 20

// growPipes asks for stdioPipeSize on each of streams that is a pipe (an
// *os.File); a refusal (a lower pipe-max-size) leaves the pipe as it is.
func growPipes(streams ...any) {
	for _, f := range streams {
		if f, ok := f.(*os.File); ok {
			if fi, err := f.Stat(); err == nil && fi.Mode()&os.ModeNamedPipe != 0 {
				_, _ = unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, stdioPipeSize)
			}
		}
	}
}
