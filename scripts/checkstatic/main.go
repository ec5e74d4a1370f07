// Command checkstatic checks that Linux ELF binaries are statically
// linked: no program interpreter (PT_INTERP) and no shared libraries
// (DT_NEEDED), so they run in an empty root with no libc, as the
// container image needs. It also reads the Go build information and
// requires CGO_ENABLED=0 and -trimpath.
//
//	go run ./scripts/checkstatic dist/agentmesh-linux-amd64 ...
//
// It exits 1 naming each binary that fails.
package main

import (
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"os"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: checkstatic BINARY...")
		os.Exit(2)
	}
	failed := false
	for _, path := range os.Args[1:] {
		if err := check(path); err != nil {
			fmt.Fprintf(os.Stderr, "checkstatic: %s: %v\n", path, err)
			failed = true
			continue
		}
		fmt.Printf("%s: static, CGO_ENABLED=0, -trimpath\n", path)
	}
	if failed {
		os.Exit(1)
	}
}

// check returns why the binary at path is not a static, cgo-free,
// trimmed Go binary, or nil.
func check(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var errs []error
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			errs = append(errs, errors.New("has a program interpreter (PT_INTERP): dynamically linked"))
		}
	}
	if libs, err := f.ImportedLibraries(); err != nil {
		errs = append(errs, fmt.Errorf("reading its dynamic section: %w", err))
	} else if len(libs) > 0 {
		errs = append(errs, fmt.Errorf("needs shared libraries %q", libs))
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("no Go build information: %w", err))...)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" {
		errs = append(errs, fmt.Errorf("built with CGO_ENABLED=%q, want 0", settings["CGO_ENABLED"]))
	}
	if settings["-trimpath"] != "true" {
		errs = append(errs, errors.New("built without -trimpath"))
	}
	return errors.Join(errs...)
}
