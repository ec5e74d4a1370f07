package main

import (
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestE2EEtcdReplicaKilledMidDelegation: two `serve` replicas over one
// etcd; a synchronous delegation through replica 1 to an agent that never
// answers; replica 1 is killed (SIGKILL: no shutdown, its owner lease is
// left to expire). Replica 2 shows the record failed with code
// interrupted a few seconds later (the owner TTL, 5 s, and a margin),
// instead of running forever.
func TestE2EEtcdReplicaKilledMidDelegation(t *testing.T) {
	t.Parallel()
	agents := newAgents(t)
	spec := serveSpec{token: "t", args: []string{"--store", "etcd", "--etcd-endpoints", startEtcd(t), "--allow-private-endpoints"}}
	a, b := startServe(t, spec), startServe(t, spec)

	r := a.client().do("POST", "/v1/agents", agentJSON("stall-agent", agents.url("/stall"), "stall"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r)
	go func() {
		// Ends with a broken connection when replica 1 dies.
		_, _ = a.client().try(context.Background(), "POST", "/v1/delegate", map[string]any{"targetName": "stall-agent", "task": "never answered"})
	}()
	var id string
	select {
	case id = <-agents.slowStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the agent got no task")
	}
	record := func() map[string]any {
		r := b.client().do("GET", "/v1/delegations/"+id, nil)
		require.Equal(t, http.StatusOK, r.status, "%s", r)
		return r.obj(t)
	}
	require.Eventually(t, func() bool {
		r := b.client().do("GET", "/v1/delegations/"+id, nil)
		return r.status == http.StatusOK && r.obj(t)["status"] == "running"
	}, 10*time.Second, 10*time.Millisecond, "replica 2 sees the delegation running")
	assert.NotEmpty(t, record()["owner"], "the record names its owner")

	killed := time.Now()
	a.signal(syscall.SIGKILL)
	a.waitExit(10 * time.Second)
	require.Eventually(t, func() bool { return record()["status"] != "running" }, 15*time.Second, 20*time.Millisecond,
		"replica 2 must interrupt the dead replica's delegation")
	took := time.Since(killed)
	rec := record()
	assert.Equal(t, "failed", rec["status"])
	assert.Equal(t, "interrupted", rec["code"])
	assert.NotEmpty(t, rec["finishedAt"])
	t.Logf("replica 2 showed the record failed/interrupted %s after SIGKILL of replica 1", took.Round(time.Millisecond))
	assert.Less(t, took, 10*time.Second, "within the owner TTL (5 s) and a margin")
	b.stop()
}
