package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"sync"
	"time"
)

// mcpClient is a minimal MCP client over a child process's stdio: JSON-RPC
// 2.0 messages, one per line (the MCP stdio transport). It is safe for
// concurrent calls, which the server answers as they finish, so several
// workers can share the one connection an MCP host has with its server.
//
// It speaks just enough MCP to measure a server (initialize, then
// tools/call) with as little client work as possible, since the client
// shares the machine's CPUs with the server it measures.
type mcpClient struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser

	wmu sync.Mutex
	w   *bufio.Writer

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan rpcReply
	err     error // set once the connection is gone
	done    chan struct{}
}

type rpcReply struct {
	result json.RawMessage
	err    *rpcError
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

func (e *rpcError) Error() string { return fmt.Sprintf("JSON-RPC error %d: %s", e.Code, e.Message) }

// startMCP starts argv and initializes an MCP session with it. The child's
// stderr goes to stderr.
func startMCP(ctx context.Context, argv []string, stderr io.Writer) (*mcpClient, error) {
	if len(argv) == 0 {
		return nil, errors.New("-cmd: no command given")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &mcpClient{cmd: cmd, stdin: stdin, w: bufio.NewWriter(stdin), pending: map[int64]chan rpcReply{}, done: make(chan struct{})}
	go c.read(stdout)

	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
		ServerInfo      struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"serverInfo"`
	}
	res, err := c.call(ctx, "initialize", map[string]any{
		"protocolVersion": "2025-06-18",
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]string{"name": "meshload", "version": "1"},
	})
	if err == nil {
		err = json.Unmarshal(res, &init)
	}
	if err == nil {
		err = c.notify("notifications/initialized", map[string]any{})
	}
	if err != nil {
		c.close()
		return nil, fmt.Errorf("MCP initialize: %w", err)
	}
	return c, nil
}

// read dispatches the server's replies to the waiting calls until stdout
// closes. Notifications and server-to-client requests are ignored.
func (c *mcpClient) read(stdout io.Reader) {
	br := bufio.NewReaderSize(stdout, 1<<16)
	var err error
	for {
		var line []byte
		line, err = br.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			id, reply, ok := parseReply(line)
			if !ok {
				err = fmt.Errorf("bad message from the server: %.200q", line)
				break
			}
			if id > 0 {
				c.mu.Lock()
				ch := c.pending[id]
				delete(c.pending, id)
				c.mu.Unlock()
				if ch != nil {
					ch <- reply
				}
			}
		}
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		err = errors.New("the server closed its stdout")
	}
	c.mu.Lock()
	c.err = err
	c.mu.Unlock()
	close(c.done)
}

// successPrefix is how the go-sdk (and most servers) begin a successful
// reply: {"jsonrpc":"2.0","id":N,"result":...}.
var successPrefix = []byte(`{"jsonrpc":"2.0","id":`)

// parseReply decodes one message: the id of a reply (0 for a notification
// or a request from the server) and its result or error. A successful reply
// in the usual field order is sliced rather than decoded, because decoding
// every byte of a large result would take CPU from the server being
// measured; anything else is decoded in full.
func parseReply(line []byte) (id int64, r rpcReply, ok bool) {
	line = bytes.TrimSpace(line)
	if rest, found := bytes.CutPrefix(line, successPrefix); found && bytes.HasSuffix(rest, []byte("}")) {
		if n := bytes.IndexByte(rest, ','); n > 0 {
			if res, found := bytes.CutPrefix(rest[n:], []byte(`,"result":`)); found {
				if id, err := strconv.ParseInt(string(rest[:n]), 10, 64); err == nil && id > 0 {
					return id, rpcReply{result: res[:len(res)-1]}, true
				}
			}
		}
	}
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	if err := json.Unmarshal(line, &msg); err != nil {
		return 0, rpcReply{}, false
	}
	if msg.Method != "" || len(msg.ID) == 0 {
		return 0, rpcReply{}, true
	}
	id, err := strconv.ParseInt(string(msg.ID), 10, 64)
	if err != nil {
		return 0, rpcReply{}, true // not one of ours: meshload sends numbers
	}
	return id, rpcReply{result: msg.Result, err: msg.Error}, true
}

func (c *mcpClient) write(msg any) error {
	b, err := json.Marshal(msg)
	if err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_, _ = c.w.Write(b) // a write error sticks: Flush returns it
	_ = c.w.WriteByte('\n')
	return c.w.Flush()
}

func (c *mcpClient) notify(method string, params any) error {
	return c.write(map[string]any{"jsonrpc": "2.0", "method": method, "params": params})
}

// call sends a request and waits for its reply.
func (c *mcpClient) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	ch := make(chan rpcReply, 1)
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return nil, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = ch
	c.mu.Unlock()
	if err := c.write(map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}); err != nil {
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, err
	}
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, r.err
		}
		return r.result, nil
	case <-c.done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return nil, c.err
	case <-ctx.Done():
		c.mu.Lock()
		delete(c.pending, id)
		c.mu.Unlock()
		return nil, ctx.Err()
	}
}

// callTool calls a tool and classifies the reply: "ok", "tool_error" (a
// result with isError), "rpc_error" or a transport error.
func (c *mcpClient) callTool(ctx context.Context, name string, args any) outcome {
	res, err := c.call(ctx, "tools/call", map[string]any{"name": name, "arguments": args})
	var re *rpcError
	switch {
	case errors.As(err, &re):
		return outcome{key: "rpc_error " + strconv.Itoa(re.Code)}
	case errors.Is(err, context.Canceled):
		return outcome{key: "error: cancelled"}
	case err != nil:
		return outcome{key: "error: connection"}
	}
	// A tool result is {"content": [...], "structuredContent": ...,
	// "isError": bool}; every string inside it is JSON-escaped, so the
	// literal below can only be the result's own field.
	if bytes.Contains(res, []byte(`"isError":true`)) {
		return outcome{key: "tool_error", bytes: len(res)}
	}
	return outcome{key: "ok", bytes: len(res), ok: true}
}

// close ends the session by closing the server's stdin, as the MCP stdio
// transport specifies, and waits for the server to exit (killing it after
// 5 s).
func (c *mcpClient) close() error {
	c.stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- c.cmd.Wait() }()
	select {
	case err := <-exited:
		return err
	case <-time.After(5 * time.Second):
		_ = c.cmd.Process.Kill()
		return <-exited
	}
}
