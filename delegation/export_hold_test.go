package delegation

import "time"

// SetRunningHold changes how long c's group commit holds running records
// (runningHold), for the records queued from now on.
func (c *Client) SetRunningHold(d time.Duration) {
	c.commit.mu.Lock()
	c.commit.hold = d
	c.commit.mu.Unlock()
}

// SetCommitLinger changes how long c's group commit waits for more
// records before a write (commitLinger).
func (c *Client) SetCommitLinger(d time.Duration) {
	c.commit.mu.Lock()
	c.commit.linger = d
	c.commit.mu.Unlock()
}
