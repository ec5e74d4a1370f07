package a2aserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/a2acard"
	"github.com/agentmesh/agentmesh/a2aserver"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
)

// echo answers 200 {"result": {"echo": task}}.
func echo(task agentTask) (int, any) {
	return http.StatusOK, map[string]any{"result": map[string]any{"echo": task.Task}}
}

// says answers 200 {"result": text}.
func says(text string) func(agentTask) (int, any) {
	return func(agentTask) (int, any) { return http.StatusOK, map[string]any{"result": text} }
}

// TestDelegateBestMatch: a message with no metadata is a delegation of its
// text to the best discovery match, as POST /v1/delegate with a query; the
// task completes with the agent's JSON result as a data part.
func TestDelegateBestMatch(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envConfig{})
	e.agent("finance", []string{"budget", "cost-center"}, echo)
	e.agent("hr", []string{"employees", "org-chart"}, echo)

	const text = "What is the budget of the engineering team?"
	task, err := e.send(ctx, text, nil)
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State, statusText(task))
	assert.Equal(t, "finance", task.Metadata[a2aserver.MetaTargetAgent])
	id, _ := task.Metadata[a2aserver.MetaDelegationID].(string)
	require.NotEmpty(t, id)

	art := artifact(t, task, a2aserver.ArtifactResult)
	require.Len(t, art.Parts, 1)
	assert.Equal(t, map[string]any{"echo": text}, art.Parts[0].Data())
	assert.Equal(t, id, art.Metadata[a2aserver.MetaDelegationID])

	got := e.received()
	require.Len(t, got, 1)
	assert.Equal(t, "finance", got[0].Agent)
	assert.Equal(t, text, got[0].Task)
	assert.Equal(t, id, got[0].DelegationID)

	rec, err := e.del.Get(ctx, id) // the delegation has its record
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCompleted, rec.Status)
	assert.Equal(t, "finance", rec.TargetAgent)
}

// TestDelegateNamedTarget: metadata agentmesh/target picks the agent
// whatever the text matches; the other metadata keys reach it as the
// delegation context; a JSON string result is a text part.
func TestDelegateNamedTarget(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envConfig{})
	e.agent("finance", []string{"budget"}, echo)
	e.agent("hr", []string{"employees"}, says("Ada reports to Grace."))

	task, err := e.send(ctx, "budget budget budget: who does Ada report to?", map[string]any{
		a2aserver.MetaTarget: "hr",
		"customer":           "acme", // other keys are the delegation context
	})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State, statusText(task))
	assert.Equal(t, "hr", task.Metadata[a2aserver.MetaTargetAgent])
	art := artifact(t, task, a2aserver.ArtifactResult)
	require.Len(t, art.Parts, 1)
	assert.Equal(t, "Ada reports to Grace.", art.Parts[0].Text())

	got := e.received()
	require.Len(t, got, 1)
	assert.Equal(t, "hr", got[0].Agent)
	assert.Equal(t, "acme", got[0].Context["customer"])
	assert.EqualValues(t, 1, got[0].Context["depth"])
}

// TestDiscoverSkill: skill mesh.discover returns the ranked agents as a
// data part with the fields of GET /v1/discover, after a text summary, and
// calls no agent.
func TestDiscoverSkill(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envConfig{})
	e.agent("finance", []string{"budget", "cost-center"}, echo)
	e.agent("hr", []string{"employees"}, echo)
	e.register(registry.Agent{
		Name: "secret", Description: "Budget forecasts.", Endpoint: "https://secret.example.com/task",
		Auth: &registry.Auth{Type: "bearer", Token: "s3cret"},
	})

	task, err := e.send(ctx, "engineering budget", map[string]any{a2aserver.MetaSkill: a2acard.SkillDiscover})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State, statusText(task))
	art := artifact(t, task, a2aserver.ArtifactAgents)
	require.Len(t, art.Parts, 2)
	assert.Contains(t, art.Parts[0].Text(), "2 agents match")
	assert.Contains(t, art.Parts[0].Text(), "finance (")

	data, ok := art.Parts[1].Data().(map[string]any)
	require.True(t, ok, "data part: %#v", art.Parts[1].Data())
	results, ok := data["results"].([]any)
	require.True(t, ok, "results: %#v", data)
	require.Len(t, results, 2)
	first := results[0].(map[string]any)
	assert.Equal(t, "finance", first["agent"].(map[string]any)["name"])
	assert.Greater(t, first["score"], 0.0)
	assert.Contains(t, first, "coverage")
	assert.Equal(t, []any{"budget"}, first["matchedTerms"])
	assert.Equal(t, []any{"budget"}, first["matchedCapabilities"])
	assert.Contains(t, first, "matchedResources")
	b, _ := json.Marshal(data)
	assert.NotContains(t, string(b), "s3cret", "discovery results never carry an agent's token")

	task, err = e.send(ctx, "zebra unicorn", map[string]any{a2aserver.MetaSkill: a2acard.SkillDiscover, a2aserver.MetaLimit: 5})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State, statusText(task))
	art = artifact(t, task, a2aserver.ArtifactAgents)
	assert.Contains(t, art.Parts[0].Text(), "No registered agent matches")
	assert.Equal(t, map[string]any{"results": []any{}}, art.Parts[1].Data())

	assert.Empty(t, e.received(), "discovery calls no agent")
}

// TestDelegateFailures: a delegation the library refuses, or that runs and
// fails, ends the task failed with its error code (docs/API.md#errors) in
// the status message's text and in the metadata.
func TestDelegateFailures(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t, envConfig{})
	e.agent("finance", []string{"budget"}, echo)
	e.agent("broken", []string{"inventory"}, func(agentTask) (int, any) {
		return http.StatusInternalServerError, map[string]any{"error": "boom"}
	})

	for _, tc := range []struct {
		name, text string
		meta       map[string]any
		code       string
		ran        bool // the delegation ran: the task names its record
	}{
		{name: "no match", text: "zebra unicorn", code: delegation.CodeNoMatch},
		{name: "unknown target", text: "pay Ada", meta: map[string]any{a2aserver.MetaTarget: "payroll"}, code: delegation.CodeNotFound},
		{name: "agent error", text: "count the inventory", code: delegation.CodeAgentError, ran: true},
		{name: "cycle", text: "budget", meta: map[string]any{"chain": []any{"finance"}}, code: delegation.CodeDelegationCycle},
		{name: "depth", text: "budget", meta: map[string]any{"depth": 5}, code: delegation.CodeDepthExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task, err := e.send(ctx, tc.text, tc.meta)
			require.NoError(t, err, "a refusal is a failed task, not a protocol error")
			require.Equal(t, a2a.TaskStateFailed, task.Status.State)
			assert.True(t, strings.HasPrefix(statusText(task), tc.code+": "), "status text %q must start with the code", statusText(task))
			assert.Equal(t, tc.code, task.Status.Message.Metadata[a2aserver.MetaCode])
			assert.Equal(t, tc.code, task.Metadata[a2aserver.MetaCode])
			if tc.ran {
				assert.Equal(t, "broken", task.Metadata[a2aserver.MetaTargetAgent])
				assert.NotEmpty(t, task.Metadata[a2aserver.MetaDelegationID])
			} else {
				assert.NotContains(t, task.Metadata, a2aserver.MetaDelegationID)
			}
		})
	}
	for _, got := range e.received() {
		assert.Equal(t, "broken", got.Agent, "refused delegations send nothing")
	}
}

// TestAuthorize: Options.Authorize sees each call's operation; a refusal
// is a JSON-RPC permission error and nothing runs.
func TestAuthorize(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var ops []string
	e := newEnv(t, envConfig{opts: &a2aserver.Options{
		Authorize: func(ctx context.Context, op string) error {
			mu.Lock()
			ops = append(ops, op)
			mu.Unlock()
			if callerFrom(ctx) == "reader" && a2aserver.RequiredScope(op) != "read" {
				return fmt.Errorf("token %q lacks the %s scope", "reader", a2aserver.RequiredScope(op))
			}
			return nil
		},
	}})
	e.agent("finance", []string{"budget"}, echo)

	_, err := e.send(as(ctx, "reader"), "engineering budget", nil)
	ae := a2aError(t, err, a2a.ErrUnauthorized)
	assert.Equal(t, `permission_denied: token "reader" lacks the delegate scope`, ae.Message)
	assert.Equal(t, "permission_denied", ae.Details["code"])
	assert.Empty(t, e.received(), "a refused call runs nothing")

	task, err := e.send(as(ctx, "reader"), "engineering budget", map[string]any{a2aserver.MetaSkill: a2acard.SkillDiscover})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	got, err := e.client().GetTask(as(ctx, "reader"), &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err)
	assert.Equal(t, task.ID, got.ID)
	_, err = e.client().CancelTask(as(ctx, "reader"), &a2a.CancelTaskRequest{ID: task.ID})
	a2aError(t, err, a2a.ErrUnauthorized)

	task, err = e.send(as(ctx, "writer"), "engineering budget", nil)
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)

	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{a2aserver.OpDelegate, a2aserver.OpDiscover, a2aserver.OpReadTasks, a2aserver.OpCancelTask, a2aserver.OpDelegate}, ops)
}

// TestBadInput: a message the mesh cannot take is a JSON-RPC invalid
// params error that says what to fix, and creates no task.
func TestBadInput(t *testing.T) {
	ctx := as(context.Background(), "alice")
	e := newEnv(t, envConfig{})
	e.agent("finance", []string{"budget"}, echo)

	text := a2a.NewTextPart("engineering budget")
	for _, tc := range []struct {
		name  string
		parts []*a2a.Part
		meta  map[string]any
		want  string
	}{
		{name: "no parts", parts: []*a2a.Part{}, want: "the message has no parts"},
		{name: "empty text", parts: []*a2a.Part{a2a.NewTextPart("  \n ")}, want: "the message text is empty"},
		{name: "data part only", parts: []*a2a.Part{a2a.NewDataPart(map[string]any{"budget": 1})}, want: "message part 1 is a data part: only text parts are accepted"},
		{name: "file part", parts: []*a2a.Part{text, a2a.NewFileURLPart("https://example.com/a.pdf", "application/pdf")}, want: "message part 2 is a file URL part"},
		{name: "unknown skill", parts: []*a2a.Part{text}, meta: map[string]any{"skill": "mesh.route"}, want: `unknown skill "mesh.route"`},
		{name: "target not a string", parts: []*a2a.Part{text}, meta: map[string]any{a2aserver.MetaTarget: 42}, want: "agentmesh/target: must be a string"},
		{name: "target and query", parts: []*a2a.Part{text}, meta: map[string]any{a2aserver.MetaTarget: "finance", a2aserver.MetaQuery: "budget"}, want: "not both"},
		{name: "unknown mesh key", parts: []*a2a.Part{text}, meta: map[string]any{"agentmesh/targt": "finance"}, want: "metadata agentmesh/targt: unknown key"},
		{name: "bad timeout", parts: []*a2a.Part{text}, meta: map[string]any{a2aserver.MetaTimeoutMs: 0.5}, want: "agentmesh/timeoutMs: must be an integer from 1 to 3600000"},
		{name: "limit out of range", parts: []*a2a.Part{text}, meta: map[string]any{"skill": a2acard.SkillDiscover, a2aserver.MetaLimit: 1000}, want: "agentmesh/limit: must be an integer from 1 to 100"},
		{name: "limit of a delegation", parts: []*a2a.Part{text}, meta: map[string]any{a2aserver.MetaLimit: 3}, want: "applies to the mesh.discover skill only"},
		{name: "target of a discovery", parts: []*a2a.Part{text}, meta: map[string]any{"skill": a2acard.SkillDiscover, a2aserver.MetaTarget: "finance"}, want: "applies to the mesh.delegate skill only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			msg := a2a.NewMessage(a2a.MessageRoleUser, tc.parts...)
			msg.Metadata = tc.meta
			_, err := e.sendMessage(ctx, &a2a.SendMessageRequest{Message: msg})
			ae := a2aError(t, err, a2a.ErrInvalidParams)
			assert.True(t, strings.HasPrefix(ae.Message, "invalid_argument: "), ae.Message)
			assert.Contains(t, ae.Message, tc.want)
			assert.Equal(t, "invalid_argument", ae.Details["code"])
		})
	}

	_, err := e.send(ctx, "engineering budget", map[string]any{"skill": 7})
	a2aError(t, err, a2a.ErrInvalidParams)
	list, err := e.client().ListTasks(ctx, &a2a.ListTasksRequest{})
	require.NoError(t, err)
	assert.Empty(t, list.Tasks, "a refused message creates no task")
	assert.Empty(t, e.received())

	// A2A clients fall back to SendMessage, since the card declares no
	// streaming; the streaming method itself is refused.
	for ev, err := range e.client().SendStreamingMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, text)}) {
		require.NoError(t, err)
		task, ok := ev.(*a2a.Task)
		require.True(t, ok, "%T", ev)
		assert.Equal(t, a2a.TaskStateCompleted, task.Status.State)
	}
	rpc := a2aclient.NewJSONRPCTransport(e.card.SupportedInterfaces[0].URL, nil)
	for ev, err := range rpc.SendStreamingMessage(ctx, a2aclient.ServiceParams{}, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, text)}) {
		require.Nil(t, ev)
		a2aError(t, err, a2a.ErrUnsupportedOperation)
	}
}

// TestInputRequired: an agent that asks a question leaves the task
// input-required with the question; a message with the task's id answers
// it, through a new delegation to the same agent that names the question's
// delegation; a different caller cannot answer it.
func TestInputRequired(t *testing.T) {
	ctx := as(context.Background(), "alice")
	var mu sync.Mutex
	var sent []delegation.Message
	a2aAgent := delegation.TransportFunc(func(ctx context.Context, a registry.Agent, msg delegation.Message) (delegation.Reply, error) {
		mu.Lock()
		sent = append(sent, msg)
		n := len(sent)
		mu.Unlock()
		if n == 1 {
			return delegation.Reply{NeedsInput: true, Result: json.RawMessage(`"Which quarter?"`)}, nil
		}
		return delegation.Reply{Result: json.RawMessage(`"Plan for ` + msg.Task + ` ready."`)}, nil
	})
	e := newEnv(t, envConfig{transports: map[registry.Protocol]delegation.Transport{registry.ProtocolA2A: a2aAgent}})
	e.register(registry.Agent{Name: "planner", Description: "Plans offsites.", Endpoint: "https://planner.example.com/a2a", Protocol: registry.ProtocolA2A})

	task, err := e.send(ctx, "Plan the team offsite", nil)
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateInputRequired, task.Status.State)
	assert.Equal(t, "Which quarter?", statusText(task))
	assert.Equal(t, "planner", task.Metadata[a2aserver.MetaTargetAgent])
	first := task.Metadata[a2aserver.MetaDelegationID]

	reply := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("Q3"))
	_, err = e.sendMessage(as(context.Background(), "mallory"), &a2a.SendMessageRequest{Message: reply})
	require.Error(t, err, "another caller cannot see the task")

	reply = a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("Q3"))
	done, err := e.sendMessage(ctx, &a2a.SendMessageRequest{Message: reply})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, done.Status.State, statusText(done))
	assert.Equal(t, task.ID, done.ID)
	assert.Equal(t, "Plan for Q3 ready.", artifact(t, done, a2aserver.ArtifactResult).Parts[0].Text())
	assert.NotEqual(t, first, done.Metadata[a2aserver.MetaDelegationID])

	mu.Lock()
	defer mu.Unlock()
	require.Len(t, sent, 2)
	assert.Equal(t, "Q3", sent[1].Task)
	assert.Equal(t, first, sent[1].Context[a2aserver.ReplyContextKey])
}

// blocking is an agent that signals each task it gets, then answers only
// when its request is cancelled.
type blocking struct {
	started chan string // delegation ids
	ended   chan string // delegation ids whose request was cancelled
}

func newBlocking(e *env, name string) *blocking {
	b := &blocking{started: make(chan string, 4), ended: make(chan string, 4)}
	srv := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var task agentTask
		_ = json.NewDecoder(r.Body).Decode(&task)
		b.started <- task.DelegationID
		<-r.Context().Done()
		b.ended <- task.DelegationID
	})
	e.agentHandler(name, []string{"slow"}, srv)
	return b
}

func waitFor(t *testing.T, ch <-chan string, what string) string {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return ""
	}
}

// TestReturnImmediatelyAndCancel: with returnImmediately the client gets
// the task at once and follows it with GetTask; tasks are the caller's
// own; CancelTask cancels the running delegation.
func TestReturnImmediatelyAndCancel(t *testing.T) {
	ctx := as(context.Background(), "alice")
	e := newEnv(t, envConfig{})
	agent := newBlocking(e, "slow")

	msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("slow job"))
	task, err := e.sendMessage(ctx, &a2a.SendMessageRequest{Message: msg, Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
	require.NoError(t, err)
	assert.False(t, task.Status.State.Terminal(), "state %s", task.Status.State)
	id := waitFor(t, agent.started, "the agent to get the task")

	require.Eventually(t, func() bool {
		got, err := e.client().GetTask(ctx, &a2a.GetTaskRequest{ID: task.ID})
		return err == nil && got.Status.State == a2a.TaskStateWorking
	}, 10*time.Second, 10*time.Millisecond, "GetTask follows the task to working")
	_, err = e.client().GetTask(as(context.Background(), "bob"), &a2a.GetTaskRequest{ID: task.ID})
	a2aError(t, err, a2a.ErrTaskNotFound)
	_, err = e.client().CancelTask(as(context.Background(), "bob"), &a2a.CancelTaskRequest{ID: task.ID})
	require.Error(t, err, "bob cannot cancel alice's task")
	list, err := e.client().ListTasks(as(context.Background(), "bob"), &a2a.ListTasksRequest{})
	require.NoError(t, err)
	assert.Empty(t, list.Tasks)
	list, err = e.client().ListTasks(ctx, &a2a.ListTasksRequest{})
	require.NoError(t, err)
	require.Len(t, list.Tasks, 1)
	assert.Equal(t, task.ID, list.Tasks[0].ID)

	canceled, err := e.client().CancelTask(ctx, &a2a.CancelTaskRequest{ID: task.ID})
	require.NoError(t, err)
	assert.Equal(t, a2a.TaskStateCanceled, canceled.Status.State)
	assert.Equal(t, id, waitFor(t, agent.ended, "the agent's request to be cancelled"))
	rec, err := e.del.Wait(ctx, id)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCanceled, rec.Status)
}

// TestClientGoneCancelsDelegation: a blocking SendMessage whose client
// goes away cancels its delegation, as POST /v1/delegate does.
func TestClientGoneCancelsDelegation(t *testing.T) {
	e := newEnv(t, envConfig{})
	agent := newBlocking(e, "slow")

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := e.client().SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("slow job"))})
		errc <- err
	}()
	id := waitFor(t, agent.started, "the agent to get the task")
	cancel()
	require.Error(t, <-errc)
	assert.Equal(t, id, waitFor(t, agent.ended, "the agent's request to be cancelled"))
	rec, err := e.del.Wait(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, delegation.StatusCanceled, rec.Status)
}

// TestNewNeedsCollaborators: New refuses missing collaborators.
func TestNewNeedsCollaborators(t *testing.T) {
	_, err := a2aserver.New(nil, nil, nil)
	require.Error(t, err)
}

// TestResultFidelity: a JSON result reaches the client as the agent sent
// it, empty arrays and objects included.
func TestResultFidelity(t *testing.T) {
	e := newEnv(t, envConfig{})
	result := map[string]any{"items": []any{}, "count": 0.0, "nested": map[string]any{"empty": map[string]any{}, "list": []any{1.0, "two", nil}}}
	e.agent("inventory", []string{"stock"}, func(agentTask) (int, any) {
		return http.StatusOK, map[string]any{"result": result}
	})
	task, err := e.send(context.Background(), "stock levels", nil)
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State, statusText(task))
	assert.Equal(t, result, artifact(t, task, a2aserver.ArtifactResult).Parts[0].Data())

	got, err := e.client().GetTask(context.Background(), &a2a.GetTaskRequest{ID: task.ID})
	require.NoError(t, err)
	assert.Equal(t, result, artifact(t, got, a2aserver.ArtifactResult).Parts[0].Data())
}

// TestMeshToMesh: a mesh registered as an a2a agent of another is
// delegated to over A2A like any agent. The mesh's A2A transport sends the
// delegation context as message metadata, which this server takes as the
// context again, so the hop count carries on across meshes and two meshes
// that delegate to each other stop at the depth limit.
func TestMeshToMesh(t *testing.T) {
	ctx := context.Background()
	a, b := newEnv(t, envConfig{}), newEnv(t, envConfig{})
	b.agent("finance", []string{"budget"}, echo)
	a.register(registry.Agent{
		Name: "mesh-b", Description: "Another mesh.", Capabilities: []string{"budget", "forecast"},
		Endpoint: b.card.SupportedInterfaces[0].URL, Protocol: registry.ProtocolA2A,
	})

	task, err := a.send(ctx, "budget of engineering", map[string]any{"customer": "acme"})
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateCompleted, task.Status.State, statusText(task))
	assert.Equal(t, "mesh-b", task.Metadata[a2aserver.MetaTargetAgent])
	assert.Equal(t, map[string]any{"echo": "budget of engineering"}, artifact(t, task, a2aserver.ArtifactResult).Parts[0].Data())
	got := b.received()
	require.Len(t, got, 1)
	assert.EqualValues(t, 2, got[0].Context["depth"], "mesh A's hop counts")
	assert.Equal(t, "acme", got[0].Context["customer"])

	// Each mesh's best match for a forecast is the other mesh.
	b.register(registry.Agent{
		Name: "mesh-a", Description: "Another mesh.", Capabilities: []string{"forecast"},
		Endpoint: a.card.SupportedInterfaces[0].URL, Protocol: registry.ProtocolA2A,
	})
	task, err = a.send(ctx, "forecast", nil)
	require.NoError(t, err)
	require.Equal(t, a2a.TaskStateFailed, task.Status.State)
	assert.Contains(t, statusText(task), delegation.CodeDepthExceeded, "the innermost refusal is reported")
	assert.Len(t, b.received(), 1, "no agent was called")
}
