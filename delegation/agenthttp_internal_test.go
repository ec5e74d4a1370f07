package delegation

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// One mapping of an HTTP status for every transport: agent_error,
// retryable with the agent's Retry-After for 429, 502, 503 and 504, and a
// message that names the status once.
func TestStatusError(t *testing.T) {
	for _, tc := range []struct {
		status    int
		retryable bool
	}{
		{http.StatusTooManyRequests, true},
		{http.StatusBadGateway, true},
		{http.StatusServiceUnavailable, true},
		{http.StatusGatewayTimeout, true},
		{http.StatusInternalServerError, false},
		{http.StatusNotFound, false},
		{http.StatusTemporaryRedirect, false},
		{http.StatusNoContent, false},
	} {
		te := statusError(tc.status, "7", headDetail([]byte(" busy \xff ")), nil)
		if te.Code != CodeAgentError || te.Status != tc.status || te.Retryable != tc.retryable {
			t.Errorf("statusError(%d) = %+v, want agent_error, retryable %v", tc.status, te, tc.retryable)
		}
		wantAfter := time.Duration(0)
		if tc.retryable {
			wantAfter = 7 * time.Second
		}
		if te.RetryAfter != wantAfter {
			t.Errorf("statusError(%d).RetryAfter = %v, want %v", tc.status, te.RetryAfter, wantAfter)
		}
		want := "agent returned " + strconv.Itoa(tc.status) + ": busy \uFFFD"
		if te.Message != want || te.Error() != want {
			t.Errorf("statusError(%d) Message %q, Error %q; want %q for both", tc.status, te.Message, te.Error(), want)
		}
	}
}

// A status the message does not name is added by Error, not to Message.
func TestTransportErrorNamesItsStatus(t *testing.T) {
	te := &TransportError{Code: CodeResponseTooLarge, Status: 200, Message: "agent reply is over the limit"}
	if got, want := te.Error(), "agent reply is over the limit (HTTP 200)"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	te = &TransportError{Code: CodeAgentUnreachable, Message: "cannot connect"}
	if got := te.Error(); got != "cannot connect" {
		t.Errorf("Error() = %q, want the message alone", got)
	}
	polled := statusError(503, "", ": restarting", nil)
	polled.Message = "polling the agent's task: " + polled.Message
	if got, want := polled.Error(), "polling the agent's task: agent returned 503: restarting"; got != want {
		t.Errorf("Error() = %q, want %q (the status once)", got, want)
	}
}
