package localsock

import "golang.org/x/sys/unix"

// socketPeerUID reads the peer's credentials with LOCAL_PEERCRED.
func socketPeerUID(fd int) (int, error) {
	cred, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return 0, err
	}
	return int(cred.Uid), nil
}
