package localsock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
)

// ErrUnsupported: this system has no Unix sockets with peer credentials.
var ErrUnsupported = errors.New("localsock: sharing a store between processes is not supported on this system")

// maxPath is the longest socket path every supported system accepts
// (macOS: 104 bytes including the terminating NUL).
const maxPath = 103

// Dir returns the run directory of the store at db: "<db>.run".
func Dir(db string) string { return db + ".run" }

// Path returns the socket path of the store at db, or an error when the
// path is too long for a Unix socket.
func Path(db string) (string, error) {
	abs, err := filepath.Abs(db)
	if err != nil {
		return "", fmt.Errorf("localsock: %w", err)
	}
	p := filepath.Join(Dir(abs), "mesh.sock")
	if len(p) > maxPath {
		return "", fmt.Errorf("localsock: socket path %s is %d bytes, longer than the %d a Unix socket allows; use a shorter --db path", p, len(p), maxPath)
	}
	return p, nil
}

// ensureDir creates dir with mode 0700, or checks an existing one: a
// directory (not a symlink) owned by uid, whose mode it resets to 0700.
func ensureDir(dir string, uid int) error {
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("localsock: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("localsock: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("localsock: %s is not a directory", dir)
	}
	owner, ok := fileOwner(fi)
	if ok && owner != uid {
		return fmt.Errorf("localsock: %s belongs to user %d, not to this user (%d); refusing to use it", dir, owner, uid)
	}
	if fi.Mode().Perm() != 0o700 {
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("localsock: %w", err)
		}
	}
	return nil
}

// Listener accepts connections from processes of one user only.
type Listener struct {
	net.Listener
	uid  int
	file os.FileInfo // the socket file as created, to tell it from a successor's
	// refused counts connections closed for a wrong user id.
	refused func(uid int)
}

// ListenOptions configures [Listen]. The zero value means the defaults.
type ListenOptions struct {
	// UID is the user id peers must have. 0 and negative values mean the
	// current process's (os.Getuid); a test sets another to check that
	// such peers are refused.
	UID int
	// Refused, if set, is called with the user id of each refused peer
	// (-1 when it could not be read).
	Refused func(uid int)
}

// Listen listens on path for processes of the same user, after making
// its directory private and removing a stale socket file.
func Listen(path string, opts *ListenOptions) (*Listener, error) {
	if !supported {
		return nil, ErrUnsupported
	}
	var o ListenOptions
	if opts != nil {
		o = *opts
	}
	if o.UID <= 0 {
		o.UID = os.Getuid()
	}
	if err := ensureDir(filepath.Dir(path), os.Getuid()); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode().Type() != fs.ModeSocket {
			return nil, fmt.Errorf("localsock: %s exists and is not a socket; refusing to replace it", path)
		}
		// Stale: the caller holds the store lock, so the process that
		// created this socket is gone.
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("localsock: remove stale socket: %w", err)
		}
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("localsock: %w", err)
	}
	// Closing the listener must not unlink a socket that a successor
	// has already put in its place.
	ln.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("localsock: %w", err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("localsock: %w", err)
	}
	return &Listener{Listener: ln, uid: o.UID, file: fi, refused: o.Refused}, nil
}

// Accept waits for the next connection from a process of the listener's
// user; connections from other users are closed and skipped.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err == nil && uid == l.uid {
			return c, nil
		}
		if err != nil {
			uid = -1
		}
		c.Close()
		if l.refused != nil {
			l.refused(uid)
		}
	}
}

// Close stops listening and removes the socket file, unless another
// process has replaced it since.
func (l *Listener) Close() error {
	path := l.Addr().String()
	err := l.Listener.Close()
	if now, statErr := os.Lstat(path); statErr == nil && os.SameFile(l.file, now) {
		_ = os.Remove(path)
	}
	return err
}

// Dial connects to the socket at path.
func Dial(ctx context.Context, path string) (net.Conn, error) {
	if !supported {
		return nil, ErrUnsupported
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", path)
}

// Supported reports whether this system can share a store between
// processes through the socket.
func Supported() bool { return supported }
