package validate

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
)

// loadCompose loads a Compose file as `docker compose config` would:
// interpolated (with MESH_TOKEN set), validated against the Compose
// specification's schema, extends and anchors resolved.
func loadCompose(t *testing.T, file string) (*types.Project, error) {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{file},
		cli.WithEnv([]string{"MESH_TOKEN=test-token"}),
		cli.WithWorkingDirectory(filepath.Dir(file)),
	)
	if err != nil {
		return nil, err
	}
	return opts.LoadProject(context.Background())
}

func TestComposeFiles(t *testing.T) {
	for _, tc := range []struct {
		file   string
		meshes []string // services running agentmesh serve
		etcd   bool
	}{
		{"docker-compose.yaml", []string{"mesh"}, false},
		{"docker-compose.replicas.yaml", []string{"mesh-1", "mesh-2", "mesh-3"}, true},
	} {
		t.Run(tc.file, func(t *testing.T) {
			p, err := loadCompose(t, filepath.Join("..", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			hostPorts := map[string]bool{}
			for _, name := range tc.meshes {
				s, ok := p.Services[name]
				if !ok {
					t.Fatalf("no service %s", name)
				}
				if s.Build == nil || s.Build.Dockerfile != "deploy/Dockerfile" {
					t.Errorf("%s: not built from deploy/Dockerfile: %+v", name, s.Build)
				} else if _, err := os.Stat(filepath.Join(s.Build.Context, s.Build.Dockerfile)); err != nil {
					t.Errorf("%s: build context %s has no %s: %v", name, s.Build.Context, s.Build.Dockerfile, err)
				}
				if !s.ReadOnly || len(s.CapDrop) == 0 || s.CapDrop[0] != "ALL" {
					t.Errorf("%s: want read_only and cap_drop [ALL]", name)
				}
				if v := s.Environment["MESH_TOKEN"]; v == nil || *v != "test-token" {
					t.Errorf("%s: MESH_TOKEN is not taken from the environment", name)
				}
				if v := s.Environment["MESH_ALLOW_ENDPOINT_HOSTS"]; v == nil || *v != "echo" {
					t.Errorf("%s: the echo agent's host is not allowed", name)
				}
				if v := s.Environment["MESH_STORE"]; tc.etcd != (v != nil && *v == "etcd") {
					t.Errorf("%s: MESH_STORE %v, want etcd: %t", name, v, tc.etcd)
				}
				if len(s.Ports) != 1 || s.Ports[0].Target != 8766 || hostPorts[s.Ports[0].Published] {
					t.Errorf("%s: want one published port to 8766, each on its own host port: %+v", name, s.Ports)
				} else {
					hostPorts[s.Ports[0].Published] = true
				}
				agents := false
				for _, v := range s.Volumes {
					if v.Target == "/agents" {
						agents = true
						if _, err := os.Stat(filepath.Join(v.Source, "echo.yaml")); err != nil {
							t.Errorf("%s: the agent directory %s: %v", name, v.Source, err)
						}
					}
				}
				if !agents {
					t.Errorf("%s: no agent directory mounted at /agents", name)
				}
			}
			echo, ok := p.Services["echo"]
			if !ok || echo.Build == nil || echo.Build.Target != "echoagent" {
				t.Errorf("no echo service built from the echoagent target")
			}
			if _, ok := p.Services["etcd"]; ok != tc.etcd {
				t.Errorf("etcd service: %t, want %t", ok, tc.etcd)
			}
		})
	}
}

// TestComposeStrict: the schema check can fail — a misspelled service
// key, and a missing MESH_TOKEN, are refused.
func TestComposeStrict(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "docker-compose.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "compose", "agents"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), "    read_only: true\n", "    readonly: true\n", 1)
	if bad == string(data) {
		t.Fatal("the mutation did not apply")
	}
	file := filepath.Join(dir, "docker-compose.yaml")
	if err := os.WriteFile(file, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := loadCompose(t, file); err == nil || !strings.Contains(err.Error(), "readonly") {
		t.Errorf("a misspelled key: got %v, want an error naming it", err)
	}

	opts, err := cli.NewProjectOptions([]string{filepath.Join("..", "docker-compose.yaml")}, cli.WithEnv([]string{"MESH_TOKEN="}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := opts.LoadProject(context.Background()); err == nil || !strings.Contains(err.Error(), "set MESH_TOKEN") {
		t.Errorf("no MESH_TOKEN: got %v, want the file's message", err)
	}
}
