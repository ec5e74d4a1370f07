package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnit checks deploy/systemd/agentmesh.service with systemd's
// own tools: `systemd-analyze verify` reports nothing (an unknown or
// misspelled key, a bad value, a missing executable all print a line),
// and `systemd-analyze security` rates its exposure 2.0 or lower ("OK"),
// where a unit without the hardening options rates 9.6 ("UNSAFE"). Both
// are shown to fail on a broken unit.
func TestSystemdUnit(t *testing.T) {
	if _, err := exec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	unit, err := os.ReadFile(filepath.Join("systemd", "agentmesh.service"))
	must(t, err)
	// The binary is not installed here: any executable stands in for it.
	text := strings.Replace(string(unit), "ExecStart=/usr/local/bin/agentmesh serve", "ExecStart=/bin/true", 1)
	if text == string(unit) {
		t.Fatal("the unit has no ExecStart=/usr/local/bin/agentmesh serve")
	}
	if out := analyze(t, text, "verify"); out != "" {
		t.Errorf("systemd-analyze verify:\n%s", out)
	}
	if out, err := analyzeErr(t, text, "security", "--offline=true", "--threshold=20"); err != nil {
		t.Errorf("systemd-analyze security: exposure above 2.0: %v\n%s", err, out)
	}

	misspelled := strings.Replace(text, "ProtectSystem=strict", "ProtectSystm=strict", 1)
	if out := analyze(t, misspelled, "verify"); !strings.Contains(out, "Unknown key") {
		t.Errorf("verify of a misspelled key: %q, want an unknown-key warning", out)
	}
	weak := "[Service]\nExecStart=/bin/true\n"
	if _, err := analyzeErr(t, weak, "security", "--offline=true", "--threshold=20"); err == nil {
		t.Error("security accepted a unit without hardening")
	}
}

// analyze runs systemd-analyze on the unit text and returns its combined
// output, failing the test if it cannot run.
func analyze(t *testing.T, text string, args ...string) string {
	t.Helper()
	out, err := analyzeErr(t, text, args...)
	if err != nil {
		t.Fatalf("systemd-analyze %s: %v\n%s", args[0], err, out)
	}
	return out
}

func analyzeErr(t *testing.T, text string, args ...string) (string, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "agentmesh.service")
	must(t, os.WriteFile(file, []byte(text), 0o644))
	out, err := exec.Command("systemd-analyze", append(args, file)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
