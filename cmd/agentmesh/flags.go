package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// flags is a flag set in which every flag may also come from an
// environment variable; a flag given on the command line wins.
type flags struct {
	fs  *flag.FlagSet
	env map[string]string // flag name → environment variable
}

func newFlags(name, synopsis string, stderr io.Writer) *flags {
	f := &flags{fs: flag.NewFlagSet(name, flag.ContinueOnError), env: map[string]string{}}
	f.fs.SetOutput(stderr)
	f.fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: %s\n\nFlags (each also read from the environment variable shown):\n", synopsis)
		f.fs.PrintDefaults()
	}
	return f
}

func (f *flags) describe(name, env, usage string) string {
	if env == "" {
		return usage
	}
	f.env[name] = env
	return fmt.Sprintf("%s [$%s]", usage, env)
}

func (f *flags) String(p *string, name, env, def, usage string) {
	f.fs.StringVar(p, name, def, f.describe(name, env, usage))
}

func (f *flags) Int(p *int, name, env string, def int, usage string) {
	f.fs.IntVar(p, name, def, f.describe(name, env, usage))
}

func (f *flags) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	f.fs.DurationVar(p, name, def, f.describe(name, env, usage))
}

// Bool defines a boolean flag that accepts true/false/1/0/yes/no in any
// case, and nothing else (the seed read "false" as true).
func (f *flags) Bool(p *bool, name, env string, def bool, usage string) {
	*p = def
	f.fs.Var((*strictBool)(p), name, f.describe(name, env, usage))
}

// parse parses args, then fills every flag not given on the command line
// from its environment variable. Errors name the flag or the variable.
func (f *flags) parse(args []string, getenv func(string) string) error {
	if err := f.fs.Parse(args); err != nil {
		return err
	}
	set := map[string]bool{}
	f.fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	var errs []error
	f.fs.VisitAll(func(fl *flag.Flag) {
		env := f.env[fl.Name]
		if set[fl.Name] || env == "" {
			return
		}
		if v := getenv(env); v != "" {
			if err := fl.Value.Set(v); err != nil {
				errs = append(errs, fmt.Errorf("environment variable %s: %w", env, err))
			}
		}
	})
	return errors.Join(errs...)
}

// parseArgs is parse for a command with arguments, whose flags may also
// follow them, as the usage text of main.go writes
// `delegate AGENT TASK [--async] [--wait]` (README.md#the-client-commands).
// After the first argument only the command's own flags are flags, so a
// task word such as "-3" stays a word; "--" ends the flags.
func (f *flags) parseArgs(args []string, getenv func(string) string) error {
	var pos []string
	for len(args) > 0 {
		if err := f.fs.Parse(args); err != nil {
			return err
		}
		rest := f.fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		for len(rest) > 0 && !f.isFlag(rest[0]) {
			if rest[0] == "--" {
				pos, rest = append(pos, rest[1:]...), nil
				break
			}
			pos, rest = append(pos, rest[0]), rest[1:]
		}
		args = rest
	}
	return f.parse(append([]string{"--"}, pos...), getenv)
}

// isFlag reports whether arg is one of f's flags: -name, --name, -name=v.
func (f *flags) isFlag(arg string) bool {
	name, ok := strings.CutPrefix(arg, "-")
	if !ok {
		return false
	}
	name, _, _ = strings.Cut(strings.TrimPrefix(name, "-"), "=")
	return name != "" && f.fs.Lookup(name) != nil
}

// strictBool is a flag.Value for a boolean flag or variable: it accepts
// true/false/1/0/yes/no in any case, and anything else is an error naming
// it (README.md#configuration).
type strictBool bool

func (b *strictBool) String() string {
	if b == nil {
		return "false"
	}
	return strconv.FormatBool(bool(*b))
}

func (b *strictBool) Set(s string) error {
	v, err := parseBool(s)
	if err != nil {
		return err
	}
	*b = strictBool(v)
	return nil
}

// IsBoolFlag lets "--flag" mean "--flag=true".
func (b *strictBool) IsBoolFlag() bool { return true }

func parseBool(s string) (bool, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "1", "yes":
		return true, nil
	case "false", "0", "no":
		return false, nil
	}
	return false, fmt.Errorf("invalid boolean %q: use true/false, 1/0 or yes/no", s)
}

// splitList splits a comma-separated flag value, dropping empty items.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}
