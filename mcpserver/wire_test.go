package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/mcpserver"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

var updateWire = flag.Bool("update-wire", false, "rewrite testdata/wire.golden from the server's replies")

// wireCalls are the tools/call arguments of mesh_discover whose replies
// testdata/wire.golden holds: answers with every kind of field, and
// arguments the input schema refuses (each refusal has its own text).
var wireCalls = []string{
	`{"query":"budget"}`,
	`{"query":"budget forecast","limit":1}`,
	`{"query":"budget","limit":100}`,
	`{"query":"budget","labels":{"team":"fin"}}`,
	`{"query":"budget","labels":{}}`,
	`{"query":"budget","requiredResources":["https://erp.example.com/finance/q3"]}`,
	`{"query":"budget","requiredResources":[]}`,
	`{"query":"nothing matches this"}`,
	`{"query":"BUDGET é ✓ <&>"}`,
	`{"query":"budget","limit":10.0}`,
	`{"query":"budget","limit":1e1}`,
	`{"query":"budget","query":"forecast"}`,
	`{"query":"bud\u0067et"}`,
	`{"query":"!!!"}`,
	`{}`,
	`{"query":""}`,
	`{"query":"` + strings.Repeat("a", discovery.MaxQueryRunes+1) + `"}`,
	`{"query":5}`,
	`{"query":null}`,
	`{"query":"budget","limit":0}`,
	`{"query":"budget","limit":101}`,
	`{"query":"budget","limit":1.5}`,
	`{"query":"budget","limit":"3"}`,
	`{"query":"budget","limit":null}`,
	`{"query":"budget","labels":{"team":5}}`,
	`{"query":"budget","labels":{"team":null}}`,
	`{"query":"budget","labels":null}`,
	`{"query":"budget","labels":[]}`,
	`{"query":"budget","requiredResources":[""]}`,
	`{"query":"budget","requiredResources":[5]}`,
	`{"query":"budget","requiredResources":"x"}`,
	`{"query":"budget","requiredResources":null}`,
	`{"query":"budget","extra":1}`,
	`{"Query":"budget"}`,
	`[]`,
	`"budget"`,
	`5`,
}

// wireMesh is a mesh whose records are the same on every run: a fixed
// clock and fixed agents, one with every field set and awkward text.
func wireMesh(t *testing.T) (*registry.Registry, *discovery.Engine, *delegation.Client) {
	t.Helper()
	ctx := context.Background()
	at := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return at }
	store := memstore.New()
	reg, err := registry.New(ctx, store, &registry.Options{SweepInterval: -1, Now: now})
	require.NoError(t, err)
	t.Cleanup(func() { _ = reg.Close() })
	engine := discovery.New(&discovery.Options{Now: now})
	t.Cleanup(engine.Follow(reg))
	del, err := delegation.New(ctx, reg, store, &delegation.Options{Discovery: engine, PruneInterval: -1, RescanInterval: -1})
	require.NoError(t, err)
	t.Cleanup(func() { _ = del.Close() })
	threshold := 0.55
	for _, a := range []registry.Agent{
		{
			Name: "full", DisplayName: "Full <Agent> & co", Description: "Budgets, \"quoted\", tab\tand unicode: é ✓ \u2028.",
			Capabilities: []string{"budget", "forecast"}, Examples: []string{"what is the budget?"},
			Resources: []registry.Resource{{URI: "https://erp.example.com/finance/*", Description: "ERP", Access: "read"}},
			Endpoint:  "http://127.0.0.1:9/task", Protocol: registry.ProtocolMCP,
			Auth:                &registry.Auth{Type: registry.AuthBearer, Token: "agent-secret"},
			ConfidenceThreshold: &threshold, ClarificationRequired: true, ClarificationContext: "which team?",
			Labels: map[string]string{"team": "fin", "tier": "gold"},
		},
		{Name: "plain", Description: "Budget numbers.", Capabilities: []string{"budget"}, Endpoint: "http://127.0.0.1:9/plain"},
		{Name: "other", Description: "Forecasts the weather.", Capabilities: []string{"weather forecast"}, Endpoint: "http://127.0.0.1:9/other"},
	} {
		_, _, err := reg.Register(ctx, a)
		require.NoError(t, err)
	}
	return reg, engine, del
}

// The replies to mesh_discover and tools/list are byte for byte those of
// testdata/wire.golden, written by the server before its tool path was
// made faster (go test -run TestWireUnchanged -update-wire rewrites it):
// the same answers, the same refusals of bad arguments with the same
// text, whether the engine encodes the result or the tool builds it from
// discovery.Result values.
func TestWireUnchanged(t *testing.T) {
	reg, engine, del := wireMesh(t)
	var got []byte
	// The server on the SDK's stdio transport with each searcher, then on
	// NewStdio's (which answers the plain calls itself) with the engine
	// (which writes the text copy of its JSON) and with a searcher that
	// only encodes JSON (the text copy escaped from it).
	type variant struct {
		search discovery.Searcher
		stdio  bool
	}
	sdkEnd := 0
	for _, v := range []variant{{engine, false}, {plainSearcher{engine}, false}, {engine, true}, {jsonSearcher{plainSearcher{engine}}, true}} {
		if v.stdio && sdkEnd == 0 {
			sdkEnd = len(got)
		}
		serve := func(stdin io.Reader, stdout io.Writer) (*mcp.Server, mcp.Transport) {
			if v.stdio {
				srv, tr, err := mcpserver.NewStdio(reg, v.search, del, nil, stdin, stdout)
				require.NoError(t, err)
				return srv, tr
			}
			srv, err := mcpserver.New(reg, v.search, del, nil)
			require.NoError(t, err)
			return srv, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}
		}
		c := startRawOn(t, serve, "2025-06-18")
		got = append(got, c.roundTrip(t, []byte(`{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}`))...)
		for i, args := range wireCalls {
			msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"mesh_discover","arguments":%s}}`, i+3, args)
			got = append(got, c.roundTrip(t, []byte(msg))...)
		}
		got = append(got, c.roundTrip(t, []byte(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"mesh_discover"}}`))...)
		// Clients of the newest protocol versions get results marked
		// with a resultType.
		for _, version := range []string{"2025-11-25", "2026-07-28"} {
			c := startRawOn(t, serve, version)
			for i, args := range []string{`{"query":"budget"}`, `{"query":""}`} {
				msg := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"mesh_discover","arguments":%s}}`, i+100, args)
				got = append(got, c.roundTrip(t, []byte(msg))...)
			}
		}
	}
	path := filepath.Join("testdata", "wire.golden")
	if *updateWire { // the replies of the SDK's transport
		require.NoError(t, os.WriteFile(path, got[:sdkEnd], 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	// The golden file has the replies of the first two variants; the
	// third's and the fourth's are the first's.
	first := want[:bytes.Index(want[1:], []byte(`{"jsonrpc":"2.0","id":2,`))+1]
	want = append(append(want, first...), first...)
	gotLines, wantLines := bytes.Split(got, []byte("\n")), bytes.Split(want, []byte("\n"))
	require.Len(t, gotLines, len(wantLines))
	for i := range wantLines {
		require.Equal(t, string(wantLines[i]), string(gotLines[i]), "reply %d", i)
	}
}

// Arguments given as JSON null are read as absent, for every tool (the
// SDK would apply the schema's defaults to a nil map and panic, ending
// the process): the reply is the one to a call without arguments, and the
// session goes on.
func TestNullArguments(t *testing.T) {
	reg, engine, del := wireMesh(t)
	srv, err := mcpserver.New(reg, engine, del, nil)
	require.NoError(t, err)
	c := startRaw(t, srv)
	for _, tool := range []string{mcpserver.ToolDiscover, mcpserver.ToolDelegate, mcpserver.ToolListAgents} {
		absent := c.roundTrip(t, []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`"}}`))
		null := c.roundTrip(t, []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"`+tool+`","arguments":null}}`))
		require.Equal(t, string(absent), string(null), tool)
	}
	require.Contains(t, string(c.roundTrip(t, []byte(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"mesh_discover","arguments":{"query":"budget"}}}`))), `\"name\":\"full\"`)
}

// NewStdio's transport leaves a call before initialization to the SDK
// (the same refusal as the SDK's transport), and answers every call it
// read before stdin ended.
func TestStdioTransport(t *testing.T) {
	reg, engine, del := wireMesh(t)
	call := []byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"mesh_discover","arguments":{"query":"budget"}}}` + "\n")
	early := func(stdio bool) string {
		cr, sw := io.Pipe()
		sr, cw := io.Pipe()
		var srv *mcp.Server
		var tr mcp.Transport
		if stdio {
			var err error
			srv, tr, err = mcpserver.NewStdio(reg, engine, del, nil, sr, sw)
			require.NoError(t, err)
		} else {
			var err error
			srv, err = mcpserver.New(reg, engine, del, nil)
			require.NoError(t, err)
			tr = &mcp.IOTransport{Reader: sr, Writer: sw}
		}
		ss, err := srv.Connect(context.Background(), tr, nil)
		require.NoError(t, err)
		defer ss.Close()
		go func() { _, _ = cw.Write(call) }()
		line, err := bufio.NewReader(cr).ReadBytes('\n')
		require.NoError(t, err)
		_ = cw.Close()
		return string(line)
	}
	require.Equal(t, early(false), early(true))

	cr, cw, done := runStdio(t, reg, engine, del)
	go func() {
		_, _ = cw.Write([]byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}` + "\n" +
			`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}` + "\n"))
		for i := range 20 {
			_, _ = fmt.Fprintf(cw, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"mesh_discover","arguments":{"query":"budget"}}}`+"\n", i+10)
		}
		_ = cw.Close()
	}()
	br := bufio.NewReader(cr)
	seen := map[string]bool{}
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			break
		}
		if bytes.Contains(line, []byte(`\"name\":\"full\"`)) {
			seen[string(line[:bytes.Index(line, []byte(`,"result"`))])] = true
		}
	}
	require.Len(t, seen, 20, "every call answered before the session ended")
	require.NoError(t, <-done)
}

// heldSearcher searches the engine (through Search only, not its
// encoder), except that a search for "held" waits until release is
// closed; started counts such searches.
type heldSearcher struct {
	engine  *discovery.Engine
	started chan struct{}
	release chan struct{}
}

func (s heldSearcher) Search(query string, q *discovery.Query) ([]discovery.Result, error) {
	if query == "held" {
		s.started <- struct{}{}
		<-s.release
	}
	return s.engine.Search(query, q)
}

// A call NewStdio answers never waits behind others: with more calls
// held in the searcher than the transport keeps answerers, a later call
// is still answered before any of them ends, and then all of them are.
func TestStdioCallsDoNotWaitBehindOthers(t *testing.T) {
	reg, engine, del := wireMesh(t)
	const held = 12 // more than the transport's answerers
	s := heldSearcher{engine: engine, started: make(chan struct{}, held), release: make(chan struct{})}
	cr, cw, done := runStdio(t, reg, s, del)
	lines := readLines(cr, held+2)
	// The messages are written by a goroutine of their own: a transport
	// that made a call wait would stop reading stdin, and the test must
	// then fail on its timeouts rather than hang in a write.
	out := make(chan string, held+4)
	go func() {
		defer cw.Close()
		for m := range out {
			if _, err := io.WriteString(cw, m+"\n"); err != nil {
				return
			}
		}
	}()
	release := sync.OnceFunc(func() { close(s.release) })
	t.Cleanup(func() { release(); _ = cw.Close() })
	write := func(format string, args ...any) { out <- fmt.Sprintf(format, args...) }
	write(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	require.Contains(t, <-lines, `"id":1,`)
	write(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	call := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"mesh_discover","arguments":{"query":%q}}}`
	for i := range held {
		write(call, 100+i, "held")
	}
	for range held {
		select {
		case <-s.started:
		case <-time.After(10 * time.Second):
			t.Fatal("the held calls did not all start: a call waited behind another")
		}
	}
	write(call, 7, "budget")
	select {
	case line := <-lines:
		require.Contains(t, line, `"id":7,`, "the later call is answered while the others are held")
		require.Contains(t, line, `\"name\":\"full\"`)
	case <-time.After(10 * time.Second):
		t.Fatal("a call waited behind held ones")
	}
	release()
	close(out) // the writer closes stdin once the messages are written
	answered := 0
	for line := range lines {
		require.Contains(t, line, `"result"`)
		answered++
	}
	require.Equal(t, held, answered, "every held call answered once released")
	require.NoError(t, <-done)
}

// With many calls in flight NewStdio's replies are each their own call's:
// every reply is, but for its id, the SDK transport's reply to the same
// arguments. The buffers a reply is encoded in serve the next calls, so a
// buffer given back too early would show here as another call's bytes.
func TestStdioConcurrentRepliesAreTheirOwn(t *testing.T) {
	reg, engine, del := wireMesh(t)
	argSets := wireCalls[:9] // answers of different lengths, and none
	want := make([]string, len(argSets))
	sdk := startRawOn(t, func(stdin io.Reader, stdout io.Writer) (*mcp.Server, mcp.Transport) {
		srv, err := mcpserver.New(reg, engine, del, nil)
		require.NoError(t, err)
		return srv, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}}
	}, "2025-06-18")
	for i, args := range argSets {
		line := sdk.roundTrip(t, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"mesh_discover","arguments":%s}}`, args))
		want[i] = string(bytes.TrimPrefix(line, []byte(`{"jsonrpc":"2.0","id":0,`)))
	}

	c := startRawOn(t, func(stdin io.Reader, stdout io.Writer) (*mcp.Server, mcp.Transport) {
		srv, tr, err := mcpserver.NewStdio(reg, engine, del, nil, stdin, stdout)
		require.NoError(t, err)
		return srv, tr
	}, "2025-06-18")
	const n = 400
	go func() {
		for i := range n {
			msg := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"mesh_discover","arguments":%s}}`, 1000+i, argSets[i%len(argSets)])
			c.send(t, msg)
		}
	}()
	lines := readLines(c.br, 0)
	seen := map[int]bool{}
	deadline := time.After(20 * time.Second)
	for range n {
		var line string
		select {
		case line = <-lines:
		case <-deadline:
			t.Fatalf("%d replies of %d in 20 s", len(seen), n)
		}
		var id int
		_, err := fmt.Sscanf(line, `{"jsonrpc":"2.0","id":%d,`, &id)
		require.NoError(t, err, "%.200s", line)
		prefix := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,`, id)
		require.Equal(t, want[(id-1000)%len(argSets)], strings.TrimPrefix(line, prefix), "reply to call %d", id)
		seen[id] = true
	}
	require.Len(t, seen, n)
}
