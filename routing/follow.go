package routing

import "sync"

// keepFollowing keeps stop, the end of a classifier's registry.Follow,
// with the classifier's cancels (under mu), for its Close to call; if the
// classifier closed while the snapshot was loading, it calls stop at once.
// It returns stop.
func keepFollowing(mu sync.Locker, closed *bool, cancels *[]func(), stop func()) func() {
	mu.Lock()
	was := *closed
	if !was {
		*cancels = append(*cancels, stop)
	}
	mu.Unlock()
	if was {
		stop()
	}
	return stop
}
