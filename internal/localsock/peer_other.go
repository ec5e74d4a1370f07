//go:build !linux && !darwin

package localsock

import (
	"net"
	"os"
)

const supported = false

func peerUID(net.Conn) (int, error) { return 0, ErrUnsupported }

func fileOwner(os.FileInfo) (int, bool) { return 0, false }
