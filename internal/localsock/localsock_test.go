//go:build linux || darwin

package localsock

import (
	"context"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// shortDir is a temporary directory with a path short enough for a socket.
func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ls")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func serveEcho(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

func TestListenSameUser(t *testing.T) {
	db := filepath.Join(shortDir(t), "mesh.db")
	path, err := Path(db)
	require.NoError(t, err)
	ln, err := Listen(path, nil)
	require.NoError(t, err)
	defer ln.Close()
	go serveEcho(ln)

	fi, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), "run directory mode")
	fi, err = os.Lstat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "socket mode")
	assert.Equal(t, os.ModeSocket, fi.Mode().Type())

	c, err := Dial(context.Background(), path)
	require.NoError(t, err)
	defer c.Close()
	_, err = c.Write([]byte("ping"))
	require.NoError(t, err)
	buf := make([]byte, 4)
	_, err = io.ReadFull(c, buf)
	require.NoError(t, err)
	assert.Equal(t, "ping", string(buf))
}

// TestListenRefusesOtherUser checks the peer-credential check with the
// kernel's real credentials: the listener expects another user id, so
// this process is refused before it can exchange a byte.
func TestListenRefusesOtherUser(t *testing.T) {
	path, err := Path(filepath.Join(shortDir(t), "mesh.db"))
	require.NoError(t, err)
	refused := make(chan int, 1)
	ln, err := Listen(path, &ListenOptions{UID: os.Getuid() + 4242, Refused: func(uid int) { refused <- uid }})
	require.NoError(t, err)
	defer ln.Close()
	go serveEcho(ln)

	c, err := Dial(context.Background(), path)
	require.NoError(t, err)
	defer c.Close()
	select {
	case uid := <-refused:
		assert.Equal(t, os.Getuid(), uid, "the refused peer's real uid")
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not refused")
	}
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	_, _ = c.Write([]byte("ping"))
	_, err = c.Read(make([]byte, 4))
	assert.Error(t, err, "a refused peer reads nothing")
}

// TestRefusesRealOtherUser dials from a child process running as another
// user (nobody), which needs root to start.
func TestRefusesRealOtherUser(t *testing.T) {
	if os.Getenv("LOCALSOCK_DIAL") != "" {
		c, err := Dial(context.Background(), os.Getenv("LOCALSOCK_DIAL"))
		if err != nil {
			os.Exit(3)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = c.Write([]byte("ping"))
		if _, err := io.ReadFull(c, make([]byte, 4)); err == nil {
			os.Exit(0) // echoed: accepted
		}
		os.Exit(4) // refused
	}
	if os.Getuid() != 0 {
		t.Skip("starting a process as another user needs root; TestListenRefusesOtherUser covers the check")
	}
	dir := shortDir(t)
	require.NoError(t, os.Chmod(dir, 0o755))
	path, err := Path(filepath.Join(dir, "mesh.db"))
	require.NoError(t, err)
	refused := make(chan int, 1)
	ln, err := Listen(path, &ListenOptions{Refused: func(uid int) { refused <- uid }})
	require.NoError(t, err)
	defer ln.Close()
	go serveEcho(ln)
	// nobody cannot even reach the socket through the 0700 directory and
	// the 0600 file; open both up to reach the peer-credential check.
	require.NoError(t, os.Chmod(filepath.Dir(path), 0o777))
	require.NoError(t, os.Chmod(path, 0o777))

	// The test binary sits in a private build directory: copy it where
	// nobody can run it.
	bin := filepath.Join(dir, "child.test")
	data, err := os.ReadFile(os.Args[0])
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	cmd := exec.Command(bin, "-test.run=^TestRefusesRealOtherUser$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "LOCALSOCK_DIAL="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	err = cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 4, ee.ExitCode(), "the other user's connection is closed unanswered")
	assert.Equal(t, 65534, <-refused)
}

func TestListenReplacesStaleSocket(t *testing.T) {
	path, err := Path(filepath.Join(shortDir(t), "mesh.db"))
	require.NoError(t, err)
	// A holder killed with SIGKILL leaves its socket file behind.
	old, err := Listen(path, nil)
	require.NoError(t, err)
	require.NoError(t, old.Listener.Close()) // closes without unlinking
	_, err = os.Lstat(path)
	require.NoError(t, err, "the stale socket file is there")
	_, err = Dial(context.Background(), path)
	require.Error(t, err, "nobody answers on a stale socket")

	ln, err := Listen(path, nil)
	require.NoError(t, err)
	go serveEcho(ln)
	c, err := Dial(context.Background(), path)
	require.NoError(t, err)
	c.Close()

	// Closing the old listener again must not unlink its successor's
	// socket; closing the new one removes it.
	require.NoError(t, ln.Close())
	_, err = os.Lstat(path)
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func TestCloseKeepsSuccessorSocket(t *testing.T) {
	path, err := Path(filepath.Join(shortDir(t), "mesh.db"))
	require.NoError(t, err)
	first, err := Listen(path, nil)
	require.NoError(t, err)
	second, err := Listen(path, nil) // a successor replaced the file
	require.NoError(t, err)
	defer second.Close()
	_ = first.Close()
	_, err = os.Lstat(path)
	assert.NoError(t, err, "the successor's socket survives the predecessor's Close")
}

func TestListenRefusesNonSocket(t *testing.T) {
	path, err := Path(filepath.Join(shortDir(t), "mesh.db"))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte("data"), 0o600))
	_, err = Listen(path, nil)
	require.ErrorContains(t, err, "not a socket")
	b, _ := os.ReadFile(path)
	assert.Equal(t, "data", string(b), "the file is left alone")
}

func TestListenFixesDirMode(t *testing.T) {
	path, err := Path(filepath.Join(shortDir(t), "mesh.db"))
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Dir(path), 0o755))
	ln, err := Listen(path, nil)
	require.NoError(t, err)
	defer ln.Close()
	fi, err := os.Stat(filepath.Dir(path))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
}

func TestListenRefusesForeignDir(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("giving a directory to another user needs root")
	}
	path, err := Path(filepath.Join(shortDir(t), "mesh.db"))
	require.NoError(t, err)
	require.NoError(t, os.Mkdir(filepath.Dir(path), 0o700))
	require.NoError(t, os.Chown(filepath.Dir(path), 65534, 65534))
	_, err = Listen(path, nil)
	require.ErrorContains(t, err, "belongs to user 65534")
}

func TestPathTooLong(t *testing.T) {
	_, err := Path("/" + strings.Repeat("d", 120) + "/mesh.db")
	require.ErrorContains(t, err, "shorter --db")
}
