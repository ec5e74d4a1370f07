package main

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestApplyPORT: $PORT is the port only when nothing else chose the
// listen address.
func TestApplyPORT(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		env      map[string]string
		wantPort int // cfg.port after applyPORT
		wantAddr string
		wantErr  string
	}{
		{name: "PORT alone", env: map[string]string{"PORT": "8080"}, wantPort: 8080, wantAddr: ":8766"},
		{name: "no PORT", wantPort: 0, wantAddr: ":8766"},
		{name: "--addr wins", args: []string{"--addr", "127.0.0.1:9000"}, env: map[string]string{"PORT": "8080"}, wantAddr: "127.0.0.1:9000"},
		{name: "--port wins", args: []string{"--port", "9000"}, env: map[string]string{"PORT": "8080"}, wantPort: 9000, wantAddr: ":8766"},
		{name: "MESH_ADDR wins", env: map[string]string{"PORT": "8080", "MESH_ADDR": "127.0.0.1:9000"}, wantAddr: "127.0.0.1:9000"},
		{name: "MESH_PORT wins", env: map[string]string{"PORT": "8080", "MESH_PORT": "9000"}, wantPort: 9000, wantAddr: ":8766"},
		{name: "a bad PORT that is not used is not read", args: []string{"--port", "9000"}, env: map[string]string{"PORT": "http"}, wantPort: 9000, wantAddr: ":8766"},
		{name: "not a number", env: map[string]string{"PORT": "http"}, wantErr: `environment variable PORT: "http" is not a port number`},
		{name: "out of range", env: map[string]string{"PORT": "65536"}, wantErr: "environment variable PORT"},
		{name: "zero", env: map[string]string{"PORT": "0"}, wantErr: "environment variable PORT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := func(k string) string { return tc.env[k] }
			var cfg serveConfig
			f := serveFlags(&cfg, io.Discard)
			require.NoError(t, f.parse(tc.args, env))
			err := applyPORT(&cfg, f, env)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.wantPort, cfg.port)
			assert.Equal(t, tc.wantAddr, cfg.addr)
		})
	}
}

// TestE2EServeListensOnPORT runs the binary as a PaaS would: no address
// flag, PORT in the environment; /health answers on that port. A PORT
// that is not a number is a usage error (exit 2) naming the variable.
func TestE2EServeListensOnPORT(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())

	cmd := exec.Command(binPath, "serve", "--store", "memory", "--log-format", "json")
	cmd.Env = childEnv(t, "PORT="+strconv.Itoa(port), "MESH_TOKEN="+e2eMeshToken)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	log := newLineLog()
	done := make(chan struct{})
	go func() { log.consume(stderr); _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() {
			t.Logf("agentmesh serve stderr:\n%s", log)
		}
	})
	line := log.wait(t, 20*time.Second, `"agentmesh serving"`, func(l string) bool {
		return strings.Contains(l, `"msg":"agentmesh serving"`)
	})
	var rec struct {
		Addr string `json:"addr"`
	}
	require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
	_, got, err := net.SplitHostPort(rec.Addr)
	require.NoError(t, err, rec.Addr)
	assert.Equal(t, strconv.Itoa(port), got, "serving on $PORT")

	resp, err := http.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/health")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode, "%s", body)
	assert.JSONEq(t, `{"status":"ok"}`, string(body))

	r := runCLI(t, []string{"PORT=web", "MESH_TOKEN=t"}, "", "serve", "--store", "memory")
	assert.Equal(t, 2, r.code, "%s", r)
	assert.Contains(t, r.stderr, "environment variable PORT")
}
