package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestE2EPprof: `serve --pprof-addr` on loopback serves Go's profiles on
// a listener of its own (not on the API port), and a public address is
// refused as a usage error unless --pprof-allow-public says so.
func TestE2EPprof(t *testing.T) {
	t.Parallel()
	p := startServe(t, serveSpec{token: e2eMeshToken, args: []string{"--store", "memory", "--pprof-addr", "127.0.0.1:0"}})
	line := p.stderr.wait(t, 5*time.Second, `"pprof listening"`, func(l string) bool { return strings.Contains(l, `"msg":"pprof listening"`) })
	var rec struct{ Addr string }
	require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
	require.True(t, strings.HasPrefix(rec.Addr, "127.0.0.1:"), rec.Addr)

	get := func(url string) (int, string) {
		t.Helper()
		res, err := http.Get(url)
		require.NoError(t, err)
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, string(b)
	}
	code, body := get("http://" + rec.Addr + "/debug/pprof/")
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, "goroutine")
	code, body = get("http://" + rec.Addr + "/debug/pprof/heap?debug=1")
	require.Equal(t, 200, code, body)
	assert.Contains(t, body, "heap profile")
	code, _ = get("http://" + rec.Addr + "/v1/agents")
	assert.Equal(t, 404, code, "the pprof listener serves the profiles only")
	code, _ = get(p.url + "/debug/pprof/")
	assert.NotEqual(t, 200, code, "the API port does not serve the profiles")

	p.signal(os.Interrupt)
	assert.Equal(t, 0, p.waitExit(10*time.Second), "exit code after SIGINT")

	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0", "192.0.2.1:6060", "example.com:6060"} {
		r := runCLI(t, []string{"MESH_TOKEN=t"}, "", "serve", "--addr", "127.0.0.1:0", "--store", "memory", "--pprof-addr", addr)
		assert.Equal(t, 2, r.code, "%s: %s", addr, r)
		assert.Contains(t, r.stderr, "--pprof-allow-public", addr)
	}
	help := helpFlags(runCLI(t, nil, "", "serve", "--help").stderr)
	assert.Contains(t, help["pprof-addr"], "$MESH_PPROF_ADDR", "serve -h documents --pprof-addr")
	assert.Contains(t, help["pprof-allow-public"], "$MESH_PPROF_ALLOW_PUBLIC")
	r := runCLI(t, []string{"MESH_TOKEN=t"}, "", "serve", "--addr", "127.0.0.1:0", "--store", "memory", "--pprof-addr", "localhost:6060:1")
	assert.Equal(t, 2, r.code, "%s", r)
	assert.Contains(t, r.stderr, "--pprof-addr")
}

// TestPprofCheck: which addresses count as loopback, and that the operator
// can allow a public one explicitly.
func TestPprofCheck(t *testing.T) {
	for addr, ok := range map[string]bool{
		"": true, "127.0.0.1:6060": true, "127.1.2.3:0": true, "[::1]:6060": true, "localhost:6060": true, "LocalHost:0": true,
		":6060": false, "0.0.0.0:6060": false, "[::]:6060": false, "10.0.0.1:6060": false, "example.com:6060": false, "localhost.example.com:1": false,
	} {
		err := pprofConfig{addr: addr}.check()
		if ok {
			assert.NoError(t, err, addr)
		} else {
			assert.ErrorIs(t, err, errPprofPublic, addr)
			assert.NoError(t, pprofConfig{addr: addr, allowPublic: true}.check(), "%s with --pprof-allow-public", addr)
		}
	}
	assert.Error(t, pprofConfig{addr: "no-port"}.check())
}
