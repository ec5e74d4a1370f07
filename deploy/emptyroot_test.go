// Package deploy holds the test that runs the container image's binary
// the way the image runs it; the recipes' own validation is in
// deploy/validate, a module of its own.
package deploy

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The image's user (deploy/Dockerfile: USER 65532:65532).
const imageUID, imageGID = 65532, 65532

// TestEmptyRoot runs the static binary the image ships — built by
// scripts/release.sh, as the Dockerfile builds it, or the one named by
// $AGENTMESH_STATIC_BIN — chrooted into a directory holding only that
// binary and an empty /data owned by the image's user: no libc, no /etc
// (no passwd, resolv.conf or CA bundle), a root it cannot write. It runs
// as uid 65532 with the image's environment and $PORT, as a PaaS would
// set it, and is driven over HTTP: the probes, registration, discovery
// and a delegation to a real agent, then a clean SIGTERM shutdown.
func TestEmptyRoot(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("chroot and the image's binary: linux only")
	}
	if os.Geteuid() != 0 {
		t.Skip("chroot and running as uid 65532 need root (CI runs as root)")
	}
	bin := os.Getenv("AGENTMESH_STATIC_BIN")
	if bin == "" {
		dist := t.TempDir()
		cmd := exec.Command("../scripts/release.sh", "linux/"+runtime.GOARCH)
		cmd.Env = append(os.Environ(), "DIST="+dist)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("scripts/release.sh: %v\n%s", err, out)
		}
		bin = filepath.Join(dist, "agentmesh-linux-"+runtime.GOARCH)
	}

	root := t.TempDir()
	must(t, os.Chmod(root, 0o755))
	data, err := os.ReadFile(bin)
	must(t, err)
	must(t, os.WriteFile(filepath.Join(root, "agentmesh"), data, 0o555))
	must(t, os.Mkdir(filepath.Join(root, "data"), 0o700))
	must(t, os.Chown(filepath.Join(root, "data"), imageUID, imageGID))
	entries, err := os.ReadDir(root)
	must(t, err)
	if len(entries) != 2 {
		t.Fatalf("the root holds %d entries, want agentmesh and data only", len(entries))
	}

	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var task struct {
			Task string `json:"task"`
		}
		_ = json.NewDecoder(r.Body).Decode(&task)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"result": %q}`, "forecast for "+task.Task)
	}))
	defer agent.Close()

	port := freePort(t)
	const token = "empty-root-test-token-0123456789"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/agentmesh", "serve", "--log-format", "json", "--allow-private-endpoints")
	cmd.Dir = "/"
	cmd.Env = []string{"PORT=" + strconv.Itoa(port), "MESH_TOKEN=" + token, "AGENTMESH_DB=/data/agentmesh.db"}
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     root,
		Credential: &syscall.Credential{Uid: imageUID, Gid: imageGID, Groups: []uint32{}},
	}
	stderr, err := cmd.StderrPipe()
	must(t, err)
	must(t, cmd.Start())
	logs := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logs <- sc.Text()
		}
		close(logs)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			for l := range logs {
				t.Log("agentmesh:", l)
			}
		}
	}()

	base := "http://127.0.0.1:" + strconv.Itoa(port)
	waitStatus(t, base+"/health", http.StatusOK, exited)
	waitStatus(t, base+"/health/ready", http.StatusOK, exited)

	status, uid := procStatus(t, cmd.Process.Pid)
	if uid != strconv.Itoa(imageUID) {
		t.Errorf("the process runs as uid %s, want %d (%s)", uid, imageUID, status)
	}

	code, body := call(t, "POST", base+"/v1/agents", token, `{
		"name": "weather-agent",
		"description": "Weather forecasts for any city.",
		"capabilities": ["weather", "forecast"],
		"endpoint": "`+agent.URL+`/task"}`)
	if code != http.StatusCreated {
		t.Fatalf("register: %d %s", code, body)
	}
	code, body = call(t, "GET", base+"/v1/discover?query=weather+forecast", token, "")
	if code != http.StatusOK || !strings.Contains(body, `"weather-agent"`) {
		t.Fatalf("discover: %d %s", code, body)
	}
	code, body = call(t, "POST", base+"/v1/delegate", token, `{"targetName": "weather-agent", "task": "Lisbon"}`)
	if code != http.StatusOK || !strings.Contains(body, "forecast for Lisbon") {
		t.Fatalf("delegate: %d %s", code, body)
	}
	if code, _ := call(t, "GET", base+"/v1/agents", "wrong-token", ""); code != http.StatusUnauthorized {
		t.Errorf("a wrong token: %d, want 401", code)
	}

	fi, err := os.Stat(filepath.Join(root, "data", "agentmesh.db"))
	must(t, err)
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != imageUID {
		t.Errorf("the store file is owned by uid %d, want %d", st.Uid, imageUID)
	}

	must(t, cmd.Process.Signal(syscall.SIGTERM))
	select {
	case err := <-exited:
		if err != nil {
			t.Errorf("after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no exit within 30s of SIGTERM")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// waitStatus polls url until it answers want, failing if the process
// exits or 30 seconds pass.
func waitStatus(t *testing.T, url string, want int, exited <-chan error) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	last := "no answer"
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			t.Fatalf("agentmesh exited before %s answered %d: %v", url, want, err)
		default:
		}
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == want {
				return
			}
			last = fmt.Sprintf("%d %s", resp.StatusCode, b)
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%s did not answer %d within 30s: %s", url, want, last)
}

func call(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(b)
}

// procStatus returns the process's /proc status and its real uid.
func procStatus(t *testing.T, pid int) (string, string) {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	must(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Uid:"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return line, f[0]
			}
		}
	}
	return "", ""
}
