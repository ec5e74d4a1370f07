package delegation

import (
	"context"
	"time"

	"github.com/agentmesh/agentmesh/internal/retryafter"
	"github.com/agentmesh/agentmesh/registry"
)

// NewWithSeams is New with a test clock (nil: time.Now) and sleep between
// retries (nil: a real sleep).
func NewWithSeams(ctx context.Context, dir registry.Subscriber, store Store, opts *Options,
	now func() time.Time, sleep func(ctx context.Context, d time.Duration) error) (*Client, error) {
	return newClient(ctx, dir, store, opts, seams{now: now, sleep: sleep})
}

// Internals under test.
var (
	DecodeResult  = decodeResult
	DecodeReply   = decodeReply
	DecodeOutcome = decodeOutcome
	RetryAfter    = func(v string, now time.Time) time.Duration { return retryafter.Parse(v, now, maxRetryAfter) }
	Jitter        = jitter
)
