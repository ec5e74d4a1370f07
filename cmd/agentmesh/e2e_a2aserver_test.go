package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/a2aserver"
)

// TestE2EA2AServer uses a running `agentmesh serve` as one A2A agent
// (docs/API.md#a2a): its card is public, and an A2A client built from it delegates
// through /a2a with a bearer token to a registered agent and gets the
// agent's result. Without a token /a2a answers 401; a read-only token can
// discover but not delegate.
func TestE2EA2AServer(t *testing.T) {
	t.Parallel()
	ag := newAgents(t)
	// reader-next is the reader's successor in a rotation: the same
	// principal, so it sees the reader's tasks.
	tokens := writeTemp(t, "tokens.yaml", tokensFile("- name: reader-next\n  principal: reader\n  token: e2e-reader-next-token-0123456789\n  scopes: [read]\n"))
	p := startServe(t, serveSpec{token: e2eMeshToken, args: []string{"--allow-private-endpoints", "--tokens-file", tokens}})
	r := p.client().do(http.MethodPost, "/v1/agents", agentJSON("finance", ag.url("/sync"), "budget", "cost-center"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r)

	// The card, without authentication.
	r = p.as("").do(http.MethodGet, "/.well-known/agent-card.json", nil)
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	var served a2a.AgentCard
	r.decode(t, &served)
	var skills []string
	for _, s := range served.Skills {
		skills = append(skills, s.ID)
	}
	assert.ElementsMatch(t, []string{a2acard.SkillDiscover, a2acard.SkillDelegate}, skills)
	require.Len(t, served.SupportedInterfaces, 1)
	assert.True(t, strings.HasSuffix(served.SupportedInterfaces[0].URL, "/a2a"), served.SupportedInterfaces[0].URL)

	// An A2A client resolves the card as it would any agent's, and sends
	// the mesh's token as the card's security scheme asks.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	card, err := agentcard.DefaultResolver.Resolve(ctx, p.url)
	require.NoError(t, err)
	creds := a2aclient.NewInMemoryCredentialsStore()
	creds.Set("mesh", "meshToken", a2aclient.AuthCredential(e2eMeshToken))
	creds.Set("reader", "meshToken", a2aclient.AuthCredential(readerToken))
	creds.Set("reader-next", "meshToken", a2aclient.AuthCredential("e2e-reader-next-token-0123456789"))
	client, err := a2aclient.NewFromCard(ctx, card, a2aclient.WithCallInterceptors(&a2aclient.AuthInterceptor{Service: creds}))
	require.NoError(t, err)
	defer client.Destroy()
	send := func(ctx context.Context, text string, meta map[string]any) (*a2a.Task, error) {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(text))
		msg.Metadata = meta
		res, err := client.SendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
		if err != nil {
			return nil, err
		}
		task, ok := res.(*a2a.Task)
		require.True(t, ok, "SendMessage answered %T", res)
		return task, nil
	}

	mesh := a2aclient.AttachSessionID(ctx, "mesh")
	const text = "What is the engineering budget?"
	task, err := send(mesh, text, nil)
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State, "%+v", task.Status.Message)
	assert.Equal(t, "finance", task.Metadata[a2aserver.MetaTargetAgent])
	require.Len(t, task.Artifacts, 1)
	assert.Equal(t, map[string]any{"echo": text}, task.Artifacts[0].Parts[0].Data())
	id, _ := task.Metadata[a2aserver.MetaDelegationID].(string)
	assert.Equal(t, text, ag.request(t, id).Task)
	rec := p.client().do(http.MethodGet, "/v1/delegations/"+id, nil)
	require.Equal(t, http.StatusOK, rec.status, "%s", rec)
	assert.Equal(t, "completed", rec.obj(t)["status"], "the delegation has its record")
	assert.Equal(t, "default", rec.obj(t)["principal"], "the A2A delegation is MESH_TOKEN's principal's")
	p.as(readerToken).do(http.MethodGet, "/v1/delegations/"+id, nil).requireError(t, http.StatusNotFound, "not_found")

	task, err = send(mesh, "payroll", map[string]any{a2aserver.MetaTarget: "payroll"})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateFailed, task.Status.State)
	assert.Equal(t, "not_found", task.Metadata[a2aserver.MetaCode])

	// A read-only token discovers, and may not delegate.
	reader := a2aclient.AttachSessionID(ctx, "reader")
	task, err = send(reader, "budget", map[string]any{a2aserver.MetaSkill: a2acard.SkillDiscover})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	_, err = send(reader, text, nil)
	require.ErrorIs(t, err, a2a.ErrUnauthorized)
	assert.Contains(t, err.Error(), `token "reader" lacks the delegate scope`)
	_, err = client.GetTask(reader, &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err, "the reader reads its own task")
	_, err = client.GetTask(mesh, &a2a.GetTaskRequest{ID: task.ID})
	require.ErrorIs(t, err, a2a.ErrTaskNotFound, "tasks belong to the principal that created them")
	_, err = client.GetTask(a2aclient.AttachSessionID(ctx, "reader-next"), &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err, "another token of the reader's principal reads its task")

	// No token: the HTTP server refuses before the A2A layer.
	_, err = send(ctx, text, nil)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "401")
	raw := p.as("").do(http.MethodPost, "/a2a", `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{}}`)
	raw.requireError(t, http.StatusUnauthorized, "unauthenticated")
	assert.Equal(t, 1, ag.count("/sync"), "only the authorised delegation reached the agent")
}
