//go:build linux

package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// The stdio pipes are grown to stdioPipeSize when the kernel allows that
// much; anything that is not a pipe is left alone.
func TestGrowPipes(t *testing.T) {
	r, w, err := os.Pipe()
	require.NoError(t, err)
	defer r.Close()
	defer w.Close()
	before, err := unix.FcntlInt(w.Fd(), unix.F_GETPIPE_SZ, 0)
	require.NoError(t, err)
	require.Less(t, before, stdioPipeSize, "a new pipe has the default size")

	file, err := os.Create(filepath.Join(t.TempDir(), "not-a-pipe"))
	require.NoError(t, err)
	defer file.Close()
	growPipes(r, w, file, strings.NewReader("not a file"))

	limit := stdioPipeSize
	if b, err := os.ReadFile("/proc/sys/fs/pipe-max-size"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n < limit && os.Geteuid() != 0 {
			limit = before // refused: the pipe stays as it was
		}
	}
	for _, f := range []*os.File{r, w} {
		got, err := unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0)
		require.NoError(t, err)
		assert.Equal(t, limit, got)
	}
}
