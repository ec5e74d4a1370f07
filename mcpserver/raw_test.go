package mcpserver_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"sync"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/mcpserver"
)

// rawClient speaks JSON-RPC lines to a server on the SDK's IOTransport
// over pipes, as an MCP host does with `agentmesh` on stdio, and reads
// the replies as lines, byte for byte.
type rawClient struct {
	w  io.WriteCloser
	br *bufio.Reader
}

// startRaw connects srv to a rawClient and initializes the session; the
// session ends at cleanup.
func startRaw(tb testing.TB, srv *mcp.Server) *rawClient {
	tb.Helper()
	return startRawVersion(tb, srv, "2025-06-18")
}

// startRawVersion is startRaw with the protocol version the client asks
// for.
func startRawVersion(tb testing.TB, srv *mcp.Server, version string) *rawClient {
	tb.Helper()
	return startRawOn(tb, func(r io.Reader, w io.Writer) (*mcp.Server, mcp.Transport) {
		return srv, &mcp.IOTransport{Reader: io.NopCloser(r), Writer: nopWriteCloser{w}}
	}, version)
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// startRawOn is startRawVersion with the server and transport that
// serve gives for the server's stdin and stdout.
func startRawOn(tb testing.TB, serve func(stdin io.Reader, stdout io.Writer) (*mcp.Server, mcp.Transport), version string) *rawClient {
	tb.Helper()
	cr, sw := io.Pipe() // server → client
	sr, cw := io.Pipe() // client → server
	srv, tr := serve(sr, sw)
	ss, err := srv.Connect(context.Background(), tr, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		_ = cw.Close()
		_ = ss.Close()
		_ = cr.Close()
	})
	c := &rawClient{w: cw, br: bufio.NewReaderSize(cr, 1<<16)}
	c.send(tb, []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"`+version+`","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`))
	c.reply(tb)
	c.send(tb, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`))
	return c
}

// send writes one message.
func (c *rawClient) send(tb testing.TB, msg []byte) {
	tb.Helper()
	if _, err := c.w.Write(append(msg[:len(msg):len(msg)], '\n')); err != nil {
		tb.Fatal(err)
	}
}

// reply reads one line.
func (c *rawClient) reply(tb testing.TB) []byte {
	tb.Helper()
	line, err := c.br.ReadBytes('\n')
	if err != nil {
		tb.Fatal(err)
	}
	return line
}

// roundTrip sends msg and returns the next line.
func (c *rawClient) roundTrip(tb testing.TB, msg []byte) []byte {
	tb.Helper()
	c.send(tb, msg)
	return c.reply(tb)
}

// run sends n calls, msg(i) for i in [0, n), with up to inFlight
// unanswered at a time, and checks that every reply is a result that is
// not a tool error.
func (c *rawClient) run(tb testing.TB, inFlight, n int, msg func(i int) []byte) {
	tb.Helper()
	slots := make(chan struct{}, inFlight)
	var wg sync.WaitGroup
	wg.Add(1)
	var werr error
	go func() {
		defer wg.Done()
		for i := range n {
			slots <- struct{}{}
			m := msg(i)
			if _, werr = c.w.Write(append(m[:len(m):len(m)], '\n')); werr != nil {
				return
			}
		}
	}()
	for range n {
		line, err := c.br.ReadBytes('\n')
		if err != nil {
			tb.Fatal(err)
		}
		if !bytes.Contains(line, []byte(`"result":`)) || bytes.Contains(line, []byte(`"isError":true`)) {
			tb.Fatalf("reply: %.300s", line)
		}
		<-slots
	}
	wg.Wait()
	if werr != nil {
		tb.Fatal(werr)
	}
}

// readLines reads r's lines, newline included, into the channel it
// returns (buffered for n), which it closes at the end of r: a test then
// waits for a line with a timeout instead of blocking in a read.
func readLines(r io.Reader, n int) <-chan string {
	lines := make(chan string, n)
	go func() {
		defer close(lines)
		br := bufio.NewReader(r)
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				return
			}
			lines <- line
		}
	}()
	return lines
}

// runStdio runs NewStdio's server on pipes: the test reads its stdout
// from out and writes its stdin to in; done gets Run's error once in is
// closed and the session ends.
func runStdio(tb testing.TB, reg mcpserver.Registry, search discovery.Searcher, del mcpserver.Delegations) (out *io.PipeReader, in *io.PipeWriter, done <-chan error) {
	tb.Helper()
	cr, sw := io.Pipe()
	sr, cw := io.Pipe()
	srv, tr, err := mcpserver.NewStdio(reg, search, del, nil, sr, sw)
	require.NoError(tb, err)
	ended := make(chan error, 1)
	go func() { ended <- srv.Run(context.Background(), tr); _ = sw.Close() }()
	return cr, cw, ended
}
