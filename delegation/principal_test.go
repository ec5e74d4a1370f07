package delegation_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/internal/apierr"
	"github.com/agentmesh/agentmesh/principal"
)

func asPrincipal(name string, admin bool) context.Context {
	return principal.NewContext(context.Background(), principal.Principal{Name: name, Admin: admin})
}

// A delegation record belongs to the principal that started it: another
// principal is told it does not exist, in every read and in Cancel, and
// does not see it in lists; an admin and a caller without a principal see
// everything.
func TestRecordsBelongToTheirPrincipal(t *testing.T) {
	e := newEnv(t, nil)
	e.agentServer("finance", ok(`{"content":"done"}`))
	// slow accepts its tasks and never calls back.
	e.agentServer("slow", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) })

	a, b := asPrincipal("team-a", false), asPrincipal("team-b", false)
	done, err := e.c.Delegate(a, delegation.Request{Target: "finance", Task: "team a's secret task"})
	require.NoError(t, err)
	assert.Equal(t, "team-a", done.Principal)
	running, err := e.c.Delegate(a, delegation.Request{Target: "slow", Task: "long job", Async: true})
	require.NoError(t, err)
	mine, err := e.c.Delegate(b, delegation.Request{Target: "finance", Task: "team b's task"})
	require.NoError(t, err)

	for _, id := range []string{done.ID, running.ID} {
		_, err := e.c.Get(b, id)
		require.ErrorIs(t, err, delegation.ErrNotFound, "team-b reads %s", id)
		wctx, cancel := context.WithTimeout(b, time.Second)
		_, err = e.c.Wait(wctx, id)
		cancel()
		require.ErrorIs(t, err, delegation.ErrNotFound, "team-b waits on %s", id)
		// The message is the one of a missing record.
		_, missing := e.c.Get(b, "no-such-id")
		assert.Equal(t, apiMessage(missing, "no-such-id"), apiMessage(err, id))
	}
	_, err = e.c.Cancel(b, running.ID)
	require.ErrorIs(t, err, delegation.ErrNotFound)
	got, err := e.c.Get(a, running.ID)
	require.NoError(t, err)
	assert.False(t, got.Status.Final(), "team-b's cancel changed nothing")

	ids := func(ctx context.Context, f delegation.ListFilter) []string {
		t.Helper()
		recs, err := e.c.List(ctx, f)
		require.NoError(t, err)
		var out []string
		for _, r := range recs {
			out = append(out, r.ID)
		}
		return out
	}
	assert.ElementsMatch(t, []string{mine.ID}, ids(b, delegation.ListFilter{}))
	assert.ElementsMatch(t, []string{mine.ID}, ids(b, delegation.ListFilter{Principal: "team-a"}), "a filter cannot widen the caller's view")
	assert.ElementsMatch(t, []string{done.ID, running.ID}, ids(a, delegation.ListFilter{}))
	assert.ElementsMatch(t, []string{done.ID, running.ID, mine.ID}, ids(asPrincipal("ops", true), delegation.ListFilter{}))
	assert.ElementsMatch(t, []string{mine.ID}, ids(asPrincipal("ops", true), delegation.ListFilter{Principal: "team-b"}))
	assert.ElementsMatch(t, []string{done.ID, running.ID, mine.ID}, ids(context.Background(), delegation.ListFilter{}))

	// The owner and an admin cancel it.
	_, err = e.c.Get(asPrincipal("ops", true), running.ID)
	require.NoError(t, err)
	got, err = e.c.Cancel(a, running.ID)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCanceled, got.Status)
}

// Records without a principal (started by a caller without one, or
// stored before records had principals) belong to principal.Default.
func TestRecordsWithoutPrincipalAreDefaults(t *testing.T) {
	e := newEnv(t, nil)
	e.agentServer("finance", ok(`{"content":"done"}`))
	rec := e.delegate(delegation.Request{Target: "finance", Task: "host task"})
	assert.Empty(t, rec.Principal)
	_, err := e.c.Get(asPrincipal(principal.Default, false), rec.ID)
	require.NoError(t, err)
	_, err = e.c.Get(asPrincipal("team-a", false), rec.ID)
	require.ErrorIs(t, err, delegation.ErrNotFound)
}

// apiMessage is the message err shows to API callers, with id replaced.
func apiMessage(err error, id string) string {
	_, msg, _ := apierr.Describe(err)
	return strings.ReplaceAll(msg, id, "{id}")
}

// A delegation running in this client (a sync one, in flight) is
// cancelled only by its principal: another is told it does not exist and
// the call goes on.
func TestRunningDelegationCancelledOnlyByItsPrincipal(t *testing.T) {
	e := newEnv(t, nil)
	started := make(chan string, 1)
	e.agentServer("hang", func(w http.ResponseWriter, r *http.Request) {
		started <- readTask(t, r).DelegationID
		<-r.Context().Done()
	})
	a := asPrincipal("team-a", false)
	done := make(chan delegation.Record, 1)
	go func() {
		rec, err := e.c.Delegate(a, delegation.Request{Target: "hang", Task: "long sync job"})
		assert.NoError(t, err)
		done <- rec
	}()
	id := <-started

	_, err := e.c.Cancel(asPrincipal("team-b", false), id)
	require.ErrorIs(t, err, delegation.ErrNotFound)
	select {
	case rec := <-done:
		t.Fatalf("team-b's cancel ended the delegation: %+v", rec)
	case <-time.After(50 * time.Millisecond):
	}
	got, err := e.c.Cancel(a, id)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCanceled, got.Status)
	assert.Equal(t, delegation.StatusCanceled, (<-done).Status)
}
