package apierr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/agentmesh/agentmesh/internal/apierr"
)

var errMissing = apierr.New("widgets", "not_found", "widget not found")

type fieldErr struct{ field string }

func (e *fieldErr) Error() string { return "widgets: invalid " + e.field }
func (e *fieldErr) Describe() (string, string) {
	return apierr.CodeInvalidArgument, e.field + ": must be set"
}

func TestDescribe(t *testing.T) {
	detailed := apierr.Errorf(errMissing, "name %q", "w1")
	for _, tc := range []struct {
		name          string
		err           error
		code, message string
		ok            bool
	}{
		{"sentinel", errMissing, "not_found", "widget not found", true},
		{"detail", detailed, "not_found", `widget not found: name "w1"`, true},
		{"detail of detail", apierr.Errorf(detailed, "again"), "not_found", `widget not found: name "w1": again`, true},
		{"wrapped", fmt.Errorf("loading: %w", detailed), "not_found", `widget not found: name "w1"`, true},
		{"own type", fmt.Errorf("x: %w", &fieldErr{"size"}), "invalid_argument", "size: must be set", true},
		{"canceled", fmt.Errorf("store: %w", context.Canceled), "canceled", "the request was canceled", true},
		{"deadline", context.DeadlineExceeded, "timeout", "the request timed out", true},
		{"internal", errors.New("disk on fire"), "", "", false},
		{"nil", nil, "", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg, ok := apierr.Describe(tc.err)
			if code != tc.code || msg != tc.message || ok != tc.ok {
				t.Errorf("Describe = %q, %q, %v; want %q, %q, %v", code, msg, ok, tc.code, tc.message, tc.ok)
			}
			if got := apierr.Code(tc.err); got != tc.code {
				t.Errorf("Code = %q, want %q", got, tc.code)
			}
		})
	}
}

func TestErrorfMatchesItsSentinel(t *testing.T) {
	other := apierr.New("widgets", "not_found", "widget not found")
	detailed := apierr.Errorf(apierr.Errorf(errMissing, "a"), "b")
	if !errors.Is(detailed, errMissing) {
		t.Error("an Errorf error must match its sentinel")
	}
	if errors.Is(detailed, other) {
		t.Error("an Errorf error must not match another sentinel with the same text")
	}
	if got, want := detailed.Error(), "widgets: widget not found: a: b"; got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
}

func TestRewordKeepsTheSentinelNotItsWords(t *testing.T) {
	e := apierr.Reword(apierr.Errorf(errMissing, "a"), "no widget named %q", "w")
	if !errors.Is(e, errMissing) {
		t.Error("a Reword error must match its sentinel")
	}
	code, msg, ok := apierr.Describe(e)
	if !ok || code != "not_found" || msg != `no widget named "w"` {
		t.Errorf("Describe = %q, %q, %v; want not_found, the reworded message alone", code, msg, ok)
	}
	if got, want := e.Error(), `widgets: no widget named "w"`; got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
}

func TestJoin(t *testing.T) {
	size := &fieldErr{"size"}
	color := &fieldErr{"color"}
	if apierr.Join() != nil || apierr.Join(nil, nil) != nil {
		t.Error("Join of no error must be nil")
	}
	if got := apierr.Join(nil, size); got != error(size) {
		t.Errorf("Join of one error = %v, want the error itself", got)
	}
	joined := apierr.Join(size, nil, fmt.Errorf("wrapped: %w", color))
	if got, want := joined.Error(), errors.Join(size, fmt.Errorf("wrapped: %w", color)).Error(); got != want {
		t.Errorf("Error = %q, want errors.Join's %q", got, want)
	}
	code, msg, ok := apierr.Describe(fmt.Errorf("saving: %w", joined))
	if code != "invalid_argument" || msg != "size: must be set; color: must be set" || !ok {
		t.Errorf("Describe = %q, %q, %v; want the first code and every message", code, msg, ok)
	}
	var fe *fieldErr
	if !errors.As(joined, &fe) || fe != size {
		t.Error("errors.As must find the joined errors")
	}
	if _, _, ok := apierr.Describe(apierr.Join(size, errors.New("disk on fire"))); ok {
		t.Error("a join holding an internal error must be internal")
	}
}

func TestWrapHiddenKeepsTheCauseOutOfTheText(t *testing.T) {
	cause := fmt.Errorf("dial tcp 10.0.0.5:80: %w", context.DeadlineExceeded)
	err := apierr.WrapHidden(errMissing, cause, "timed out after %ds", 3)
	if got, want := err.Error(), "widgets: widget not found: timed out after 3s"; got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
	if !errors.Is(err, errMissing) || !errors.Is(err, context.DeadlineExceeded) {
		t.Error("WrapHidden must match its sentinel and its cause")
	}
	if code, msg, _ := apierr.Describe(err); code != "not_found" || msg != "widget not found: timed out after 3s" {
		t.Errorf("Describe = %q, %q", code, msg)
	}
}

func TestWrapKeepsTheCause(t *testing.T) {
	cause := fmt.Errorf("dial: %w", context.DeadlineExceeded)
	err := apierr.Wrap(errMissing, cause, "fetching %s", "w1")
	if got, want := err.Error(), "widgets: widget not found: fetching w1: dial: context deadline exceeded"; got != want {
		t.Errorf("Error = %q, want %q", got, want)
	}
	if !errors.Is(err, errMissing) || !errors.Is(err, context.DeadlineExceeded) {
		t.Error("Wrap must match its sentinel and its cause")
	}
	code, msg, ok := apierr.Describe(err)
	if code != "not_found" || msg != "widget not found: fetching w1: dial: context deadline exceeded" || !ok {
		t.Errorf("Describe = %q, %q, %v: the sentinel's code, not the cause's", code, msg, ok)
	}
	if _, msg, _ := apierr.Describe(apierr.Wrap(errMissing, cause, "")); msg != "widget not found: dial: context deadline exceeded" {
		t.Errorf("without a format the detail is the cause's text: %q", msg)
	}
}
