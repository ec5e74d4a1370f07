package client

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/httpserver"
)

// MaxWait is the longest long-poll the server holds a GET
// /v1/delegations/{id}?wait= for; [Client.WaitDelegation] polls again
// after each.
const MaxWait = 60 * time.Second

// delegateBody is the body of POST /v1/delegate.
type delegateBody struct {
	TargetName     string         `json:"targetName,omitempty"`
	Query          string         `json:"query,omitempty"`
	Task           string         `json:"task"`
	Context        map[string]any `json:"context,omitempty"`
	Resources      []string       `json:"resources,omitempty"`
	SourceAgent    string         `json:"sourceAgent,omitempty"`
	Async          bool           `json:"async,omitempty"`
	TimeoutMs      int64          `json:"timeoutMs,omitempty"`
	AsyncTimeoutMs int64          `json:"asyncTimeoutMs,omitempty"`
}

// delegationPath is the path of the delegation id.
func delegationPath(id string) string { return "/v1/delegations/" + url.PathEscape(id) }

// Delegate runs one delegation on the server (POST /v1/delegate) and
// returns its record: final for a synchronous delegation, accepted (or
// already final) for an async one. Every field of req is sent except
// Turn, which the HTTP API does not take (a request with one is
// refused); Timeout and AsyncTimeout travel in whole milliseconds,
// rounded up.
//
// The record is the delegation as the reply to POST /v1/delegate
// reported it, as delegation.Client.Delegate returns it in process. The
// reply carries part of the record; Delegate reads the rest (GET
// /v1/delegations/{id}, scope read). When the delegation has moved on by
// then (an async agent already called back), the record keeps the
// replied outcome and takes only the fields fixed at creation (Depth,
// CreatedAt, …) from the read; its UpdatedAt is then zero. When the read
// fails — a token without the read scope, ctx done — the record is what
// the reply and req tell (no CreatedAt, UpdatedAt, FinishedAt or Depth),
// without an error: the delegation ran.
//
// As in process, a delegation that ran and failed is not an error but a
// record with Status failed, timeout or canceled. The errors are the
// refusals, matching the delegation package's sentinels
// (delegation.ErrNotFound for an unknown target, delegation.ErrNoMatch,
// delegation.ErrInvalid, delegation.ErrDepthExceeded, delegation.ErrCycle,
// delegation.ErrResourceNotCovered), and the failures of the call. It is
// not retried unless the connection could not be made.
func (c *Client) Delegate(ctx context.Context, req delegation.Request) (delegation.Record, error) {
	if !c.usable() {
		return delegation.Record{}, ErrNoServer
	}
	switch {
	case req.Turn != nil:
		return delegation.Record{}, fmt.Errorf("%w: Turn is not supported over the HTTP API", delegation.ErrInvalid)
	case req.Timeout < 0, req.AsyncTimeout < 0:
		return delegation.Record{}, fmt.Errorf("%w: Timeout and AsyncTimeout must not be negative", delegation.ErrInvalid)
	}
	body := delegateBody{
		TargetName:     req.Target,
		Query:          req.Query,
		Task:           req.Task,
		Context:        req.Context,
		Resources:      req.Resources,
		SourceAgent:    req.SourceAgent,
		Async:          req.Async,
		TimeoutMs:      ceilMillis(req.Timeout),
		AsyncTimeoutMs: ceilMillis(req.AsyncTimeout),
	}
	var rep httpserver.DelegateResponse // part of the record
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/delegate", body: body, retry: retryDial, route: routeDelegate}, &rep); err != nil {
		return delegation.Record{}, err
	}
	rec := delegation.Record{
		ID:          rep.ID,
		SourceAgent: rep.SourceAgent,
		TargetAgent: rep.TargetAgent,
		Task:        req.Task,
		Status:      rep.Status,
		Result:      rep.Result,
		Error:       rep.Error,
		Code:        rep.Code,
		LatencyMs:   rep.LatencyMs,
		Attempts:    rep.Attempts,
		Async:       req.Async,
		NeedsInput:  rep.NeedsInput,
		Response:    rep.Response,
		Deadline:    rep.Deadline,
	}
	stored, err := c.Delegation(ctx, rep.ID)
	switch {
	case err != nil || stored.ID != rep.ID:
		return rec, nil
	case stored.Status == rep.Status:
		return stored, nil
	}
	// The delegation moved on (an async agent called back already): the
	// fields fixed at creation from the store, the outcome as replied.
	rec.SourceAgent, rec.TargetAgent, rec.Task = stored.SourceAgent, stored.TargetAgent, stored.Task
	rec.Depth, rec.Async, rec.CreatedAt, rec.Owner = stored.Depth, stored.Async, stored.CreatedAt, stored.Owner
	return rec, nil
}

// ceilMillis is d in whole milliseconds, rounded up (so a positive d never
// becomes 0, the default).
func ceilMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// Delegation returns the record of the delegation id (GET
// /v1/delegations/{id}); delegation.ErrNotFound when there is none.
func (c *Client) Delegation(ctx context.Context, id string) (delegation.Record, error) {
	return c.getDelegation(ctx, id, 0)
}

func (c *Client) getDelegation(ctx context.Context, id string, wait time.Duration) (delegation.Record, error) {
	var q url.Values
	if wait > 0 {
		q = url.Values{"wait": {wait.Round(time.Millisecond).String()}}
	}
	var rec delegation.Record
	_, err := c.do(ctx, call{method: http.MethodGet, path: delegationPath(id), query: q, route: routeDelegations}, &rec)
	return rec, err
}

// WaitDelegation returns the record of the delegation id once it is final
// (completed, failed, timeout or canceled), long-polling GET
// /v1/delegations/{id}?wait= (at most MaxWait per request, fitted into
// ctx's deadline). If ctx is done first, it returns the record as last
// seen (the zero Record if none was) with an error wrapping ctx's error,
// like delegation.Client.Wait.
func (c *Client) WaitDelegation(ctx context.Context, id string) (delegation.Record, error) {
	if !c.usable() {
		return delegation.Record{}, ErrNoServer
	}
	var last delegation.Record
	for {
		wait := c.pollWait(ctx)
		if wait < time.Millisecond {
			wait = 0 // no room for a long-poll: read, and pause between reads
		}
		rec, err := c.getDelegation(ctx, id, wait)
		if err != nil {
			if ctx.Err() != nil {
				return last, err
			}
			return rec, err
		}
		last = rec
		if rec.Status.Final() {
			return rec, nil
		}
		if wait == 0 {
			t := time.NewTimer(plainPollPause)
			select {
			case <-ctx.Done():
				t.Stop()
				return last, c.ctxError(call{method: http.MethodGet, path: delegationPath(id)}, ctx.Err())
			case <-t.C:
			}
		}
	}
}

// plainPollPause is the pause between the reads of WaitDelegation when
// there is no room for a long-poll.
const plainPollPause = 100 * time.Millisecond

// pollWait is the wait of the next long-poll: MaxWait, shortened to end
// before ctx's deadline and within the HTTP client's timeout.
func (c *Client) pollWait(ctx context.Context) time.Duration {
	wait := MaxWait
	if dl, ok := ctx.Deadline(); ok {
		rem := time.Until(dl)
		wait = min(wait, rem-min(rem/2, time.Second))
	}
	if t := c.hc.Timeout; t > 0 {
		wait = min(wait, t-min(t/2, 2*time.Second))
	}
	return wait
}

// Delegations returns every delegation record selected by f (GET
// /v1/delegations), newest first, fetching page after page as the loop
// asks for more: f.Limit is the page size (0 means the server's, 50; at
// most 500), f.Offset the number of matching records skipped, f.Status,
// f.Statuses and f.Target filter as for a delegation.Store. The server
// filters by one status; with several Statuses the records are filtered
// here. A failure is yielded once, with the zero Record, and ends the
// sequence. The pages are cut by offset: a delegation that starts during
// the walk shifts the records, so one may be seen twice.
func (c *Client) Delegations(ctx context.Context, f delegation.ListFilter) iter.Seq2[delegation.Record, error] {
	return func(yield func(delegation.Record, error) bool) {
		if !c.usable() {
			yield(delegation.Record{}, ErrNoServer)
			return
		}
		if f.Limit < 0 || f.Offset < 0 {
			yield(delegation.Record{}, fmt.Errorf("%w: limit and offset must not be negative", delegation.ErrInvalid))
			return
		}
		for _, s := range append([]delegation.Status{f.Status}, f.Statuses...) {
			if s != "" && !s.Valid() {
				yield(delegation.Record{}, fmt.Errorf("%w: unknown status %q", delegation.ErrInvalid, s))
				return
			}
		}
		status, keep := f.Status, []delegation.Status(nil)
		switch {
		case f.Status != "" && len(f.Statuses) > 0 && !slices.Contains(f.Statuses, f.Status):
			return // no record has both
		case f.Status == "" && len(f.Statuses) == 1:
			status = f.Statuses[0]
		case f.Status == "" && len(f.Statuses) > 1:
			keep = f.Statuses
		}
		offset, skip := f.Offset, 0
		if keep != nil {
			offset, skip = 0, f.Offset // the offset counts matching records
		}
		for {
			q := url.Values{}
			if f.Limit > 0 {
				q.Set("limit", strconv.Itoa(f.Limit))
			}
			if offset > 0 {
				q.Set("offset", strconv.Itoa(offset))
			}
			if status != "" {
				q.Set("status", string(status))
			}
			if f.Target != "" {
				q.Set("target", f.Target)
			}
			var recs []delegation.Record
			r, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/delegations", query: q, route: routeDelegations}, &recs)
			if err != nil {
				yield(delegation.Record{}, err)
				return
			}
			for _, rec := range recs {
				if keep != nil && !slices.Contains(keep, rec.Status) {
					continue
				}
				if skip > 0 {
					skip--
					continue
				}
				if !yield(rec, nil) {
					return
				}
			}
			next, err := strconv.Atoi(nextLinkQuery(r.header).Get("offset"))
			if err != nil || len(recs) == 0 || next <= offset {
				return
			}
			offset = next
		}
	}
}

// Cancel cancels the delegation id (POST /v1/delegations/{id}/cancel) and
// returns its final record. A record already final is
// delegation.ErrFinal. Cancel is retried like a delete: when an attempt
// that got no reply had cancelled the delegation, the retry reports
// delegation.ErrFinal.
func (c *Client) Cancel(ctx context.Context, id string) (delegation.Record, error) {
	var rec delegation.Record
	_, err := c.do(ctx, call{method: http.MethodPost, path: delegationPath(id) + "/cancel", route: routeDelegations}, &rec)
	return rec, err
}
