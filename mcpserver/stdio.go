package mcpserver

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/internal/jsonvalue"
)

// NewStdio is [New] with the transport to serve it on over stdin and
// stdout, the MCP stdio transport (docs/MCP.md#performance): run it with
// srv.Run(ctx, transport). The transport hands every message to the
// SDK's newline-delimited JSON transport, except the mesh_discover calls
// with plainly valid arguments (see fastCalls) of a session initialized
// with a protocol version before 2026-07-28 and a server without
// Options.Authorize: it answers those itself, concurrently, with the
// bytes the SDK would write, so that the result's JSON is encoded once
// instead of three times (two thirds of such a call's CPU in the SDK).
//
// At the end of stdin the transport waits for the calls it is answering
// before the session sees the end.
func NewStdio(reg Registry, search discovery.Searcher, del Delegations, opts *Options, stdin io.Reader, stdout io.Writer) (*mcp.Server, mcp.Transport, error) {
	srv, t, err := newServer(reg, search, del, opts)
	if err != nil {
		return nil, nil, err
	}
	return srv, &stdioTransport{in: stdin, out: stdout, discover: t.discoverArgs, off: t.authorize != nil}, nil
}

// stdioTransport is the transport of [NewStdio].
type stdioTransport struct {
	in       io.Reader
	out      io.Writer
	discover discoverFunc
	off      bool // answer nothing itself
}

// discoverFunc answers mesh_discover's decoded arguments.
type discoverFunc = func(context.Context, *mcp.CallToolRequest, DiscoverArgs) (*mcp.CallToolResult, error)

// Connect starts the goroutine that reads stdin and connects the SDK's
// transport to the messages it does not answer.
func (s *stdioTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	pr, pw := io.Pipe()
	w := &frameWriter{w: s.out, wait: closeWait}
	d := &desk{discover: s.discover, off: s.off || s.discover == nil, w: w, sdk: pw, idle: make(chan call)}
	go d.pump(s.in)
	return (&mcp.IOTransport{Reader: pr, Writer: w}).Connect(ctx)
}

// frameWriter serializes writes to stdout: each Write is one message
// (the SDK's transport writes a message and its newline in one call).
// Messages written while another Write is on its way are queued and
// written together, by that Write before it returns, in the order they
// came: one system call for a burst of answers instead of one each. A
// queued message's Write returns at once; the first write error is kept
// and returned by every later Write. Close waits, a while, until what is
// queued is written.
type frameWriter struct {
	w    io.Writer
	wait time.Duration // how long Close waits for the queue

	mu      sync.Mutex
	written chan struct{} // while a Write is writing (others queue): closed when it ends
	queued  []byte        // messages waiting for the writing Write
	spare   []byte        // the writing Write's batch: queued's last buffer
	err     error
}

func (f *frameWriter) Write(p []byte) (int, error) {
	f.mu.Lock()
	if f.err != nil || f.written != nil {
		err := f.err
		if err == nil {
			f.queued = append(f.queued, p...)
		}
		f.mu.Unlock()
		if err != nil {
			return 0, err
		}
		return len(p), nil
	}
	f.written = make(chan struct{})
	f.mu.Unlock()
	_, err := f.w.Write(p)
	f.mu.Lock()
	for err == nil && len(f.queued) > 0 {
		batch := f.queued
		f.queued = f.spare[:0]
		f.mu.Unlock()
		_, err = f.w.Write(batch)
		f.mu.Lock()
		f.spare = batch
	}
	if err != nil {
		f.err = err
		f.queued = nil
	}
	close(f.written)
	f.written = nil
	f.mu.Unlock()
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// closeWait is how long Close waits for the queue: a client that stopped
// reading stdout must not keep the server from ending.
const closeWait = 5 * time.Second

// Close waits, up to f.wait, for the Write on its way, which writes what
// is queued; it leaves stdout open.
func (f *frameWriter) Close() error {
	f.mu.Lock()
	written := f.written
	f.mu.Unlock()
	if written == nil {
		return nil
	}
	t := time.NewTimer(f.wait)
	defer t.Stop()
	select {
	case <-written:
	case <-t.C:
	}
	return nil
}

// desk reads stdin line by line: it answers the calls it can, and passes
// every other line, byte for byte, to the SDK's transport through sdk.
type desk struct {
	discover discoverFunc
	off      bool
	w        *frameWriter
	sdk      *io.PipeWriter

	// The session's state as the lines passing by show it: ready once
	// the client has asked to initialize with a version of plainVersions
	// and said it is initialized.
	version string
	ready   bool

	calls     sync.WaitGroup // the calls being answered
	idle      chan call      // to an answerer waiting for a call
	answerers int            // answerers started (by pump's goroutine)
}

// call is a mesh_discover call the desk answers.
type call struct {
	id  []byte
	req *mcp.CallToolRequest
	in  DiscoverArgs
}

// maxAnswerers is how many goroutines answer calls and stay for the next
// ones: their stacks are grown once, where a goroutine a call would grow
// its stack again for each (a tenth of a call's CPU). A call that finds
// them all busy gets a goroutine of its own, as the SDK gives every call.
const maxAnswerers = 8

// plainVersions are the protocol versions whose tool results carry no
// resultType and which the SDK accepts as they are.
var plainVersions = map[string]bool{"2024-11-05": true, "2025-03-26": true, "2025-06-18": true, "2025-11-25": true}

// maxFastLine is the longest line the desk considers answering; longer
// lines go to the SDK as they come.
const maxFastLine = 64 << 10

func (d *desk) pump(in io.Reader) {
	br := bufio.NewReaderSize(in, maxFastLine)
	var err error
	for err == nil {
		var line []byte
		line, err = br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			// A long line: to the SDK, in pieces, up to its end.
			for errors.Is(err, bufio.ErrBufferFull) {
				if _, werr := d.sdk.Write(line); werr != nil {
					return
				}
				line, err = br.ReadSlice('\n')
			}
		} else if len(line) > 0 && d.answer(line) {
			continue
		}
		if len(line) > 0 {
			if _, werr := d.sdk.Write(line); werr != nil {
				return
			}
		}
	}
	d.calls.Wait()
	close(d.idle)
	if errors.Is(err, io.EOF) {
		err = nil // the SDK's reader sees io.EOF
	}
	_ = d.sdk.CloseWithError(err)
}

// answer starts answering line, a complete message, and reports true if
// the line is one the desk answers; it notes the session's state from
// the others.
func (d *desk) answer(line []byte) bool {
	if d.off {
		return false
	}
	if !d.ready || bytes.Contains(line, []byte(`"initialize"`)) && d.watch(line) == "initialize" {
		// Until the session is initialized, and again from a second
		// initialize on (which the SDK judges), the SDK answers all.
		d.ready = false
		d.watch(line)
		return false
	}
	if !bytes.Contains(line, []byte(`"tools/call"`)) {
		return false
	}
	id, req, ok := plainCall(line)
	if !ok {
		return false
	}
	in, ok := decodeDiscoverArgs(req.Params.Arguments)
	if !ok {
		return false
	}
	d.start(call{id, req, in})
	return true
}

// start hands c to an idle answerer, or to a new one while there are
// fewer than maxAnswerers, or else to a goroutine of its own.
func (d *desk) start(c call) {
	d.calls.Add(1)
	select {
	case d.idle <- c:
		return
	default:
	}
	if d.answerers < maxAnswerers {
		d.answerers++
		go d.answerer(c)
		return
	}
	go func() {
		defer d.calls.Done()
		d.reply(c)
	}()
}

// answerer answers c, then the calls handed to it while it waits, until
// the end of stdin.
func (d *desk) answerer(c call) {
	for ok := true; ok; c, ok = <-d.idle {
		d.reply(c)
		d.calls.Done()
	}
}

// watch follows the initialization: the client's initialize request (its
// protocol version) and its notifications/initialized. It returns the
// line's method.
func (d *desk) watch(line []byte) string {
	ms, err := members(bytes.TrimSpace(line))
	if err != nil {
		return ""
	}
	var method string
	var params json.RawMessage
	for _, m := range ms {
		switch m.key {
		case "method":
			_ = json.Unmarshal(m.value, &method)
		case "params":
			params = m.value
		}
	}
	switch method {
	case "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		d.version = ""
		if json.Unmarshal(params, &p) == nil && plainVersions[p.ProtocolVersion] {
			d.version = p.ProtocolVersion
		}
	case "notifications/initialized":
		d.ready = d.version != ""
	}
	return method
}

// plainCall decodes a tools/call request of mesh_discover written plainly:
// the members jsonrpc "2.0", a non-negative integer id or a string one of
// characters JSON writes as they are, the method and params of a name and
// arguments only (no _meta). id is the id as written. The id and
// arguments are slices of a copy of line: the reader reuses its buffer.
func plainCall(line []byte) (id []byte, req *mcp.CallToolRequest, ok bool) {
	line = bytes.TrimSpace(line)
	if !plainUTF8(line) {
		return nil, nil, false
	}
	line = bytes.Clone(line)
	ms, err := members(line)
	if err != nil || len(ms) != 4 {
		return nil, nil, false
	}
	var params []member
	for _, m := range ms {
		switch m.key {
		case "jsonrpc":
			ok = string(m.value) == `"2.0"`
		case "id":
			id, ok = m.value, plainID(m.value)
		case "method":
			ok = string(m.value) == `"tools/call"`
		case "params":
			params, err = members(m.value)
			ok = err == nil && len(params) == 2
		default:
			ok = false
		}
		if !ok {
			return nil, nil, false
		}
	}
	p := &mcp.CallToolParamsRaw{}
	for _, m := range params {
		switch m.key {
		case "name":
			if string(m.value) != `"`+ToolDiscover+`"` {
				return nil, nil, false
			}
			p.Name = ToolDiscover
		case "arguments":
			p.Arguments = m.value
		default:
			return nil, nil, false
		}
	}
	return id, &mcp.CallToolRequest{Params: p}, true
}

// plainID reports whether v is an id the SDK writes back as it is.
func plainID(v []byte) bool {
	if len(v) == 0 {
		return false
	}
	if v[0] == '"' {
		if len(v) < 2 || v[len(v)-1] != '"' {
			return false
		}
		for _, c := range v[1 : len(v)-1] {
			if !jsonvalue.Plain(c) {
				return false
			}
		}
		return true
	}
	if len(v) > 15 || (v[0] == '0' && len(v) > 1) {
		return false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// reply answers the call: the tool's result, encoded as the SDK encodes
// it, in the frame its transport writes.
func (d *desk) reply(c call) {
	id := c.id
	bufs := replies.Get().(*replyBuffers)
	defer replies.Put(bufs)
	res, callErr := d.discover(lendAnswer(context.Background(), &bufs.answer), c.req, c.in)
	bp := &bufs.frame
	frame := append((*bp)[:0], `{"jsonrpc":"2.0","id":`...)
	frame = append(frame, id...)
	if callErr == nil {
		head := len(frame)
		var err error
		if frame, err = appendResult(append(frame, `,"result":`...), res, &bufs.answer); err == nil {
			*bp = append(frame, "}\n"...)
			_, _ = d.w.Write(*bp)
			return
		}
		callErr, frame = err, frame[:head]
	}
	var we *jsonrpc.Error
	if !errors.As(callErr, &we) {
		we = &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: callErr.Error()}
	}
	b, err := json.Marshal(we)
	if err != nil {
		return
	}
	frame = append(frame, `,"error":`...)
	frame = append(frame, b...)
	*bp = append(frame, "}\n"...)
	_, _ = d.w.Write(*bp)
}

// replyBuffers are the buffers of one reply: the ones lent to
// mesh_discover for its answer and its text copy (through the context)
// and the frame the reply is written from, about twice the answer (the
// structured content and its text copy). All would otherwise be garbage
// after every call. They are taken and given back by the one goroutine
// that answers the call, so sync.Pool finds them again: a buffer given
// back at the end of one call and taken at the start of the next, by a
// goroutine woken on the other processor, was never found.
type replyBuffers struct {
	answer answerBuffers
	frame  []byte
}

var replies = sync.Pool{New: func() any { return new(replyBuffers) }}

// appendResult appends a tool result as the SDK encodes it: a result of
// one text content holding the structured content's JSON (what
// mesh_discover answers) is written directly, its text copy the one in
// lent when that holds it, else escaped from the structured content's
// bytes; any other result by the SDK's own encoding.
func appendResult(dst []byte, res *mcp.CallToolResult, lent *answerBuffers) ([]byte, error) {
	sc, ok := res.StructuredContent.(json.RawMessage)
	if ok && !res.IsError && res.Meta == nil && res.InputRequests == nil && res.RequestState == "" && len(res.Content) == 1 {
		if tc, ok := res.Content[0].(*mcp.TextContent); ok && tc.Meta == nil && tc.Annotations == nil && tc.Text == string(sc) {
			dst = append(dst, `{"content":[{"type":"text","text":"`...)
			if len(lent.text) > 0 {
				dst = append(dst, lent.text...)
			} else {
				dst = jsonvalue.AppendEscaped(dst, sc)
			}
			dst = append(dst, `"}],"structuredContent":`...)
			dst = append(dst, sc...)
			return append(dst, '}'), nil
		}
	}
	b, err := json.Marshal(res)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}

// plainUTF8 reports whether line is valid UTF-8 without an escaped
// surrogate (see plainObject).
func plainUTF8(line []byte) bool {
	return utf8.Valid(line) && !hasEscapedSurrogate(line)
}
