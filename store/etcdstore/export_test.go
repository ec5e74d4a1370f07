package etcdstore

import "time"

// SetAgentLease replaces the lease TTL, in seconds, of an agent with TTL
// ttlSeconds (normally its removal horizon, 4 × TTL), so that tests can
// wait for a lease to expire in a second. Call it before using s.
func SetAgentLease(s *Store, seconds func(ttlSeconds int) int64) { s.agentLease = seconds }

// SetOrphanCheck replaces how often s.WatchOrphans looks for running
// records of dead owners besides reacting to deaths (normally a minute).
// Call it before using s.
func SetOrphanCheck(s *Store, d time.Duration) { s.orphanCheck = d }
