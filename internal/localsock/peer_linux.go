package localsock

import "golang.org/x/sys/unix"

// socketPeerUID reads the peer's credentials with SO_PEERCRED.
func socketPeerUID(fd int) (int, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return 0, err
	}
	return int(cred.Uid), nil
}
