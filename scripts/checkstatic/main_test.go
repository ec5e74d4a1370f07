package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestCheck builds one small program three ways: static as release.sh
// builds, with cgo (dynamically linked against libc), and without
// -trimpath. Only the first passes.
func TestCheck(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("ELF binaries: linux only")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	// os/user with cgo links libc's getpwnam: a dynamic binary.
	prog := "package main\n\nimport (\n\t\"fmt\"\n\t\"os/user\"\n)\n\nfunc main() { fmt.Println(user.Current()) }\n"
	if err := os.WriteFile(src, []byte(prog), 0o644); err != nil {
		t.Fatal(err)
	}
	build := func(name string, cgo string, args ...string) string {
		t.Helper()
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", append(append([]string{"build", "-o", out}, args...), src)...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED="+cgo, "GOFLAGS=")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", name, err, b)
		}
		return out
	}

	static := build("static", "0", "-trimpath", "-ldflags=-s -w")
	if err := check(static); err != nil {
		t.Errorf("static binary refused: %v", err)
	}
	untrimmed := build("untrimmed", "0")
	if err := check(untrimmed); err == nil || !strings.Contains(err.Error(), "-trimpath") {
		t.Errorf("binary without -trimpath: got %v, want a -trimpath error", err)
	}
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Log("no C compiler: the cgo case is not built")
		return
	}
	dynamic := build("dynamic", "1", "-trimpath")
	err := check(dynamic)
	if err == nil {
		t.Fatal("cgo binary accepted as static")
	}
	for _, want := range []string{"PT_INTERP", "shared libraries", "CGO_ENABLED"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("cgo binary: %v; want it to mention %s", err, want)
		}
	}
}
