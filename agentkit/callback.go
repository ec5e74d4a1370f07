package agentkit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/agentmesh/agentmesh/delegation"
)

// callbackAttempts is how many times a callback is sent when the mesh
// does not answer, or answers 429 or 5xx.
const callbackAttempts = 5

// callbackTimeout bounds all the attempts of one callback.
const callbackTimeout = 2 * time.Minute

// callback POSTs out (the mesh's own type of a callback's body) to the
// callback URL u, retrying (with the same body) after a network error,
// 429 or 5xx: the mesh keeps the first outcome to arrive. Any other answer is final; a 409 (the delegation already
// final, or past its deadline) is not an error of the agent's.
func (a *Agent) callback(u string, out delegation.Outcome) error {
	body, err := json.Marshal(out)
	if err != nil {
		return fmt.Errorf("encode: %w", err)
	}
	ctx, cancel := a.background(callbackTimeout)
	defer cancel()
	var last error
	for attempt := range callbackAttempts {
		if attempt > 0 {
			// 250 ms, 500 ms, 1 s, 2 s, plus up to 50% jitter.
			wait := 250 * time.Millisecond << (attempt - 1)
			wait += rand.N(wait / 2)
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return fmt.Errorf("%w (after %v)", ctx.Err(), last)
			}
		}
		status, err := a.post(ctx, u, body)
		switch {
		case err != nil:
			last = err
		case status == http.StatusTooManyRequests || status >= 500:
			last = fmt.Errorf("the mesh answered %d", status)
		case status == http.StatusConflict:
			a.log.Info("agentkit: the delegation was already final", "status", status)
			return nil
		case status >= 300:
			return fmt.Errorf("the mesh answered %d", status)
		default:
			return nil
		}
	}
	return fmt.Errorf("%d attempts: %w", callbackAttempts, last)
}

// post sends one attempt and returns the mesh's status.
func (a *Agent) post(ctx context.Context, u string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.hc.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // without the URL: its token is a credential
		}
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}
