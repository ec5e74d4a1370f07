// Package localsock is the Unix socket through which several agentmesh
// processes on one machine share one store: the process that holds the
// bbolt file listens on it, the others dial it.
//
// The socket lives in a directory next to the store file, "<db>.run",
// created with mode 0700 and refused when another user owns it; the socket
// itself has mode 0600. Every accepted connection is checked with the
// kernel's peer credentials (SO_PEERCRED on Linux, LOCAL_PEERCRED on
// macOS): a peer whose user id is not the listener's is closed before a
// byte is read. Listen replaces a socket file left by a holder that was
// killed, so it must only be called by the process that holds the store's
// lock: no live process can own the old file then.
//
// On systems without peer credentials (Windows), [Listen] and [Dial]
// return [ErrUnsupported] and every process opens the store itself.
package localsock
