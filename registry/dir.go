package registry

import (
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentmesh/agentmesh/netguard"
)

// MaxAgentFileSize is the largest agent file [LoadDir] reads (1 MiB).
const MaxAgentFileSize = 1 << 20

// maxDirDepth bounds the recursion of [LoadDir] below the directory.
const maxDirDepth = 32

// DirOptions configures [LoadDir]. A nil *DirOptions means all defaults.
type DirOptions struct {
	// Policy is the endpoint policy every agent's endpoint must pass. Nil
	// allows private addresses (the library default) and still refuses
	// the always-refused ones.
	Policy *netguard.Policy

	// LookupEnv looks up the environment variables that ${NAME}
	// references name. Nil means os.LookupEnv.
	LookupEnv func(name string) (value string, ok bool)

	// RequireDefault requires exactly one agent with is_default: true
	// (routing needs a fallback agent). False allows none.
	RequireDefault bool
}

// Problem is one thing wrong with an agent directory.
type Problem struct {
	// File is the path of the offending file (the directory itself for
	// problems of the whole directory).
	File string `json:"file"`
	// Line is the 1-based line in File, or 0 when unknown.
	Line int `json:"line,omitempty"`
	// Message says what is wrong, naming the key when there is one.
	Message string `json:"message"`
}

// String formats p as "file:line: message", or "file: message" when the
// line is unknown.
func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message)
	}
	return p.File + ": " + p.Message
}

// DirError is returned by [LoadDir]: everything wrong with the agent
// directory, in file order and then line order. Match it with [errors.As].
type DirError struct {
	// Dir is the directory that was loaded.
	Dir string
	// Problems lists every problem found; it is never empty.
	Problems []Problem
}

func (e *DirError) Error() string {
	if len(e.Problems) == 1 {
		return "registry: agent directory: " + e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "registry: agent directory %s: %d problems", e.Dir, len(e.Problems))
	for i, p := range e.Problems {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// LoadDir reads a YAML agent directory
// (docs/AGENTS.md#three-ways-to-register): one agent per *.yaml or *.yml
// file, found recursively in lexical order of their paths below dir. Names starting with "." (files and directories) are ignored.
// Symbolic links are followed, to files and to directories; a link back to
// a directory being walked is reported rather than followed (no loops).
//
// Each file holds one YAML mapping with the snake_case keys of the agent
// record (agent_id, display_name, description, endpoint, type (mcp or
// http), is_default, confidence_threshold, clarification_required,
// clarification_context, capabilities, examples, resources, auth {type,
// token, header_name}, labels, ttl_seconds). Unknown keys are errors, and so
// are files over [MaxAgentFileSize]. Environment references (${NAME},
// ${NAME:-default}, $${ for a literal ${) are expanded inside scalar values
// after parsing, never in keys or comments, so a value cannot change the
// structure of the file. Each agent is normalised and validated
// ([Agent.Normalize], [Agent.Validate] with opts.Policy); the default
// agent's threshold is 0.
//
// Over the directory, agent ids must be unique and at most one agent (with
// opts.RequireDefault exactly one) may be the default.
//
// The agents are returned in file order, with Source [SourceFile]. On any
// problem LoadDir returns no agents and a *[DirError] listing every
// problem found, with file and line where known.
func LoadDir(dir string, opts *DirOptions) ([]Agent, error) {
	var o DirOptions
	if opts != nil {
		o = *opts
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	files, probs := scanDir(dir)

	type loaded struct {
		file        string
		agent       Agent
		idLine      int
		defaultLine int
		nameDecoded bool
	}
	var all []loaded
	for _, f := range files {
		a, meta, fprobs := loadAgentFile(f.path, o)
		probs = append(probs, fprobs...)
		all = append(all, loaded{file: f.path, agent: a, idLine: meta.line("name"),
			defaultLine: meta.line("isDefault"), nameDecoded: a.Name != ""})
	}

	// Directory invariants, over every file whose agent_id could be read,
	// so that one run reports as much as possible.
	byName := map[string]int{}
	var defaults []int
	for i, l := range all {
		if !l.nameDecoded {
			continue
		}
		if j, dup := byName[l.agent.Name]; dup {
			probs = append(probs, Problem{File: l.file, Line: l.idLine,
				Message: fmt.Sprintf("agent_id %q is already defined in %s", l.agent.Name, lineRef(all[j].file, all[j].idLine))})
			continue
		}
		byName[l.agent.Name] = i
		if l.agent.IsDefault {
			defaults = append(defaults, i)
		}
	}
	if len(defaults) > 1 {
		first := all[defaults[0]]
		for _, i := range defaults[1:] {
			probs = append(probs, Problem{File: all[i].file, Line: all[i].defaultLine,
				Message: fmt.Sprintf("is_default: at most one agent may be the default; %q in %s already is",
					first.agent.Name, lineRef(first.file, first.defaultLine))})
		}
	}
	// A missing default is reported only when nothing else is wrong: a
	// file that failed to read may well be the default.
	if o.RequireDefault && len(defaults) == 0 && len(probs) == 0 {
		probs = append(probs, Problem{File: dir,
			Message: "no agent has is_default: true; routing needs exactly one default agent"})
	}

	if len(probs) > 0 {
		// By file, then by line; within a file, problems without a line
		// (missing fields) come last.
		lineKey := func(p Problem) int {
			if p.Line == 0 {
				return math.MaxInt
			}
			return p.Line
		}
		slices.SortStableFunc(probs, func(a, b Problem) int {
			return cmp.Or(strings.Compare(a.File, b.File), cmp.Compare(lineKey(a), lineKey(b)))
		})
		return nil, &DirError{Dir: dir, Problems: probs}
	}
	agents := make([]Agent, len(all))
	for i, l := range all {
		agents[i] = l.agent
	}
	return agents, nil
}

func lineRef(file string, line int) string {
	if line > 0 {
		return file + ":" + strconv.Itoa(line)
	}
	return file
}

// ---- walking the directory ----

// dirFile is an agent file found by scanDir.
type dirFile struct {
	rel  string // slash-separated path below the directory: the sort key
	path string // the path to open and to report
	info fs.FileInfo
}

// isAgentFileName reports whether name is an agent file name.
func isAgentFileName(name string) bool {
	return !strings.HasPrefix(name, ".") && (strings.HasSuffix(name, ".yaml") || strings.HasSuffix(name, ".yml"))
}

// scanDir lists the agent files below dir in lexical order of their
// slash-separated relative paths, following symbolic links, and reports
// what could not be walked.
func scanDir(dir string) ([]dirFile, []Problem) {
	root, err := os.Stat(dir)
	switch {
	case err != nil:
		return nil, []Problem{{File: dir, Message: describeFSError(err)}}
	case !root.IsDir():
		return nil, []Problem{{File: dir, Message: "not a directory"}}
	}
	var files []dirFile
	var probs []Problem
	var walk func(path, rel string, ancestors []fs.FileInfo)
	walk = func(path, rel string, ancestors []fs.FileInfo) {
		entries, err := os.ReadDir(path)
		if err != nil {
			probs = append(probs, Problem{File: path, Message: describeFSError(err)})
			return
		}
		for _, e := range entries {
			name := e.Name()
			if strings.HasPrefix(name, ".") {
				continue
			}
			p, r := filepath.Join(path, name), name
			if rel != "" {
				r = rel + "/" + name
			}
			info, err := os.Stat(p) // follows symbolic links
			if err != nil {
				if isAgentFileName(name) || e.IsDir() {
					probs = append(probs, Problem{File: p, Message: describeFSError(err)})
				}
				continue // e.g. a dangling link that is no agent file
			}
			switch {
			case info.IsDir():
				if slices.ContainsFunc(ancestors, func(a fs.FileInfo) bool { return os.SameFile(a, info) }) {
					probs = append(probs, Problem{File: p, Message: "symbolic link loop: this directory contains itself; not followed"})
					continue
				}
				if len(ancestors) > maxDirDepth {
					probs = append(probs, Problem{File: p, Message: fmt.Sprintf("nested more than %d directories deep; not read", maxDirDepth)})
					continue
				}
				walk(p, r, append(ancestors[:len(ancestors):len(ancestors)], info))
			case !isAgentFileName(name):
			case !info.Mode().IsRegular():
				probs = append(probs, Problem{File: p, Message: "not a regular file"})
			default:
				files = append(files, dirFile{rel: r, path: p, info: info})
			}
		}
	}
	walk(dir, "", []fs.FileInfo{root})
	slices.SortFunc(files, func(a, b dirFile) int { return strings.Compare(a.rel, b.rel) })
	return files, probs
}

// describeFSError is err without the path (a Problem carries it).
func describeFSError(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "does not exist (or is a broken symbolic link)"
	case errors.Is(err, fs.ErrPermission):
		return "permission denied"
	}
	return err.Error()
}
