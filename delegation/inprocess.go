package delegation

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/agentmesh/agentmesh/registry"
)

// Task is what an in-process [Handler] receives.
type Task struct {
	// DelegationID is the record id.
	DelegationID string
	// SourceAgent is the delegating agent, if the request named one.
	SourceAgent string
	// Task is the task text.
	Task string
	// Context is the caller's context with the mesh's "depth" (int) and
	// "chain" ([]string). The handler must not modify it.
	Context map[string]any
	// Turn carries a routed conversation's fields; nil for plain
	// delegations.
	Turn *Turn
}

// Handler is a Go agent hosted in the same process as the mesh: the
// transport of agents registered with Protocol "inprocess". Its
// ctx ends at the delegation deadline, or when the delegation is cancelled.
//
// The result becomes the record's result: a json.RawMessage is taken as is
// (it must be valid JSON), an [AgentResponse] (or *AgentResponse) is kept
// whole on the record with its Content as the result (as for MCP agents),
// and any other value is encoded as JSON. A returned error fails the
// delegation with code agent_error and the error's text (a
// *[TransportError] sets its own code and message); a panic fails it too.
// Handlers are never retried.
type Handler func(ctx context.Context, task Task) (result any, err error)

// Handle makes h the handler of the in-process agent called name, replacing
// any previous one; a nil h removes it. The agent itself is registered in
// the registry as usual, with Protocol registry.ProtocolInProcess, so that
// it is discovered and routed to like any other; Handle only says which Go
// function answers it in this process. A delegation to an in-process agent
// with no handler fails with code agent_unreachable. On a nil *Client,
// Handle does nothing.
func (c *Client) Handle(name string, h Handler) {
	if c == nil {
		return
	}
	c.handlersMu.Lock()
	defer c.handlersMu.Unlock()
	if h == nil {
		delete(c.handlers, name)
		return
	}
	if c.handlers == nil { // a zero Client
		c.handlers = make(map[string]Handler)
	}
	c.handlers[name] = h
}

func (c *Client) handler(name string) Handler {
	c.handlersMu.RLock()
	defer c.handlersMu.RUnlock()
	return c.handlers[name]
}

// inprocessTransport is the Transport of protocol inprocess.
type inprocessTransport struct{ c *Client }

func (t inprocessTransport) Send(ctx context.Context, a registry.Agent, msg Message) (Reply, error) {
	h := t.c.handler(a.Name)
	if h == nil {
		return Reply{}, noHandler(a.Name)
	}
	return t.c.callHandler(ctx, h, taskOf(&msg))
}

func noHandler(name string) *TransportError {
	return &TransportError{Code: CodeAgentUnreachable,
		Message: fmt.Sprintf("no in-process handler is registered for agent %s in this process", name)}
}

func taskOf(msg *Message) Task {
	return Task{DelegationID: msg.DelegationID, SourceAgent: msg.SourceAgent, Task: msg.Task, Context: msg.Context, Turn: msg.Turn}
}

type handlerResult struct {
	reply Reply
	err   error
}

// callHandler runs h on a goroutine of its own and returns its result, or
// a timeout error as soon as ctx ends: a handler that ignores its context
// cannot hold a delegation past its deadline (its goroutine is left to
// finish on its own). A panic becomes a failure.
func (c *Client) callHandler(ctx context.Context, h Handler, task Task) (Reply, error) {
	ch := make(chan handlerResult, 1)
	go func() {
		var r handlerResult
		defer func() {
			if p := recover(); p != nil {
				c.log.Warn("in-process handler panicked", "delegation_id", task.DelegationID,
					"panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				r = handlerResult{err: &TransportError{Code: CodeAgentError,
					Message: fmt.Sprintf("in-process handler panicked: %v", p)}}
			}
			ch <- r
		}()
		v, err := h(ctx, task)
		r.reply, r.err = handlerReply(v, err)
	}()
	select {
	case r := <-ch:
		return r.reply, r.err
	case <-ctx.Done():
		select {
		case r := <-ch: // it finished as the deadline passed: keep its answer
			return r.reply, r.err
		default:
		}
		return Reply{}, &TransportError{Code: CodeTimeout, Message: "the in-process handler did not return before the deadline", Err: ctx.Err()}
	}
}

// handlerReply converts a handler's return values.
func handlerReply(v any, err error) (Reply, error) {
	if err != nil {
		var te *TransportError
		if errors.As(err, &te) {
			cp := *te
			cp.Retryable = false
			if cp.Code == "" {
				cp.Code = CodeAgentError
			}
			if cp.Message == "" {
				cp.Message = err.Error()
			}
			return Reply{}, &cp
		}
		return Reply{}, &TransportError{Code: CodeAgentError, Message: err.Error(), Err: err}
	}
	var reply Reply
	switch v := v.(type) {
	case json.RawMessage:
		if !json.Valid(v) {
			return Reply{}, &TransportError{Code: CodeBadResponse, Message: "in-process handler returned invalid JSON"}
		}
		reply.Result = append(json.RawMessage(nil), v...)
	case AgentResponse:
		reply.Response = &v
	case *AgentResponse:
		if v != nil {
			cp := *v
			reply.Response = &cp
		}
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return Reply{}, &TransportError{Code: CodeBadResponse, Message: "in-process handler result does not encode as JSON: " + err.Error(), Err: err}
		}
		reply.Result = b
	}
	if reply.Response != nil {
		b, _ := json.Marshal(reply.Response.Content)
		reply.Result = b
	}
	if len(reply.Result) > MaxResultBytes {
		return Reply{}, &TransportError{Code: CodeResponseTooLarge,
			Message: fmt.Sprintf("in-process handler result is over the limit of %d bytes", MaxResultBytes)}
	}
	return reply, nil
}

// startHandler starts the handler of an async delegation to an in-process
// agent on a goroutine the client owns, and returns at once with an
// accepted reply. The handler's context ends at the async deadline; its
// outcome is recorded like a callback, and reported to the breaker (done)
// when it returns. It returns an error, without calling done, when there
// is no handler.
func (c *Client) startHandler(rec Record, msg Message, p *plan, done func(error)) (Reply, error) {
	h := c.handler(p.agent.Name)
	if h == nil {
		return Reply{}, noHandler(p.agent.Name)
	}
	hctx, cancel := withTimeout(context.Background(), p.asyncTimeout)
	f := c.trackBg(rec, cancel)
	c.bgOps.Add(1) // inside a Delegate call, so before Shutdown waits
	task := taskOf(&msg)
	go func() {
		defer c.bgOps.Done()
		defer cancel(nil)
		reply, err := c.callHandler(hctx, h, task)
		now := c.now()
		fin := c.settle(hctx, Record{CreatedAt: rec.CreatedAt}, 1, reply, err, p.asyncTimeout)
		done(breakerOutcome(fin, err))
		ctx, cancelW := context.WithTimeout(context.Background(), storeTimeout)
		defer cancelW()
		stored, changed, err := c.updateUnlessFinal(ctx, rec.ID, func(next Record) Record {
			next.Result, next.Response, next.NeedsInput = fin.Result, fin.Response, fin.NeedsInput
			next.Attempts = max(next.Attempts, 1)
			finalize(&next, fin.Status, fin.Code, fin.Error, now)
			return next
		})
		c.untrackBg(f)
		if err != nil {
			c.log.Warn("delegation record not written", "delegation_id", rec.ID, "err", err)
			return
		}
		if changed {
			c.finished(stored)
		}
	}()
	return Reply{Accepted: true}, nil
}
