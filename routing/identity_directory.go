package routing

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/agentmesh/agentmesh/session"
)

// Limits of an identities file ([ParseIdentities]).
const (
	// MaxIdentitiesFileSize is the largest identities file, in bytes.
	MaxIdentitiesFileSize = 16 << 20
	// MaxIdentityEntries is the most entries an identities file holds.
	MaxIdentityEntries = 200000
	// maxIdentityProblems is how many problems an error lists.
	maxIdentityProblems = 20
	// maxEmailLen is the longest email address (RFC 5321 path limit).
	maxEmailLen = 254
)

// IdentityEntry is one person of an identities file: the keys a request
// may name them by (SlackUserID, UserID, Email) and what they resolve to
// (EmployeeID, DisplayName, and UserID when the request did not give
// one).
type IdentityEntry struct {
	SlackUserID string `yaml:"slack_user_id"`
	UserID      string `yaml:"user_id"`
	Email       string `yaml:"email"`
	EmployeeID  string `yaml:"employee_id"`
	DisplayName string `yaml:"display_name"`
}

// identityKeys are the fields of an entry, in the order of the file
// format's documentation.
var identityKeys = []string{"slack_user_id", "user_id", "email", "employee_id", "display_name"}

func (e *IdentityEntry) field(key string) *string {
	switch key {
	case "slack_user_id":
		return &e.SlackUserID
	case "user_id":
		return &e.UserID
	case "email":
		return &e.Email
	case "employee_id":
		return &e.EmployeeID
	case "display_name":
		return &e.DisplayName
	}
	return nil
}

// ParseIdentities parses an identities file: a YAML (or JSON) list of
// entries, each a mapping of string fields
//
//	# identities.yaml
//	- slack_user_id: U024BE7LH    # keys: at least one of these three
//	  user_id: ada
//	  email: ada@example.com      # matched against a request's user_id
//	  employee_id: E1001          # required
//	  display_name: Ada Lovelace  # optional
//
// An empty file, or one holding only null or [], has no entries. The file
// is refused as a whole when any entry is wrong: an unknown or repeated
// field, a value that is not a string or a number, a malformed Slack user
// id or email, a value over the request limits, or a key (Slack user id,
// user id, email — emails compared without case) that another entry
// already has, or a user_id that is another entry's email. The error lists the problems (at most 20), each naming the
// entry by its position and line.
func ParseIdentities(data []byte) ([]IdentityEntry, error) {
	if len(data) > MaxIdentitiesFileSize {
		return nil, fmt.Errorf("routing: identities: file is %d bytes, more than %d", len(data), MaxIdentitiesFileSize)
	}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, fmt.Errorf("routing: identities: %w", err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, errors.New("routing: identities: the file holds more than one YAML document")
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	switch {
	case root.Kind == yaml.ScalarNode && root.Tag == "!!null":
		return nil, nil
	case root.Kind != yaml.SequenceNode:
		return nil, fmt.Errorf("routing: identities: line %d: the file must be a list of entries", root.Line)
	case len(root.Content) > MaxIdentityEntries:
		return nil, fmt.Errorf("routing: identities: %d entries, more than %d", len(root.Content), MaxIdentityEntries)
	}
	p := &identityParser{seen: map[string]int{}}
	entries := make([]IdentityEntry, 0, len(root.Content))
	for i, n := range root.Content {
		p.entry = i + 1
		entries = append(entries, p.parseEntry(n))
	}
	if err := p.err(); err != nil {
		return nil, err
	}
	return entries, nil
}

// identityParser checks the entries of one file.
type identityParser struct {
	entry    int            // the entry being read, from 1
	lines    []int          // the line of each entry (0 when not from a file)
	seen     map[string]int // "field\x00key" → the entry that has it
	problems []string
	more     int
}

// err is the problems found, nil if none.
func (p *identityParser) err() error {
	if len(p.problems) == 0 {
		return nil
	}
	msg := strings.Join(p.problems, "; ")
	if p.more > 0 {
		msg += fmt.Sprintf("; and %d more", p.more)
	}
	return fmt.Errorf("routing: identities: %s", msg)
}

func (p *identityParser) fail(format string, args ...any) {
	if len(p.problems) == maxIdentityProblems {
		p.more++
		return
	}
	p.problems = append(p.problems, p.where(p.entry)+": "+fmt.Sprintf(format, args...))
}

// where names entry i (from 1), with its line when it came from a file.
func (p *identityParser) where(i int) string {
	if l := p.lines[i-1]; l > 0 {
		return fmt.Sprintf("entry %d (line %d)", i, l)
	}
	return fmt.Sprintf("entry %d", i)
}

func (p *identityParser) parseEntry(n *yaml.Node) IdentityEntry {
	p.lines = append(p.lines, n.Line)
	var e IdentityEntry
	if n.Kind != yaml.MappingNode {
		p.fail("must be a mapping of %s", strings.Join(identityKeys, ", "))
		return e
	}
	set := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		dst := e.field(k.Value)
		switch {
		case k.Kind != yaml.ScalarNode || dst == nil:
			p.fail("unknown field %q (fields: %s)", truncate(k.Value, 40), strings.Join(identityKeys, ", "))
			continue
		case set[k.Value]:
			p.fail("field %s given twice", k.Value)
			continue
		case v.Kind != yaml.ScalarNode || (v.Tag != "!!str" && v.Tag != "!!int" && v.Tag != "!!float"):
			p.fail("%s must be a string", k.Value)
			continue
		}
		set[k.Value] = true
		*dst = strings.TrimSpace(v.Value)
	}
	p.check(&e)
	return e
}

// check validates one entry and records its keys.
func (p *identityParser) check(e *IdentityEntry) {
	if e.SlackUserID == "" && e.UserID == "" && e.Email == "" {
		p.fail("needs slack_user_id, user_id or email to be found by")
	}
	if e.EmployeeID == "" {
		p.fail("employee_id is required")
	}
	if e.SlackUserID != "" && !IsSlackUserID(e.SlackUserID) {
		p.fail("slack_user_id %q is not a Slack user id (U or W, then upper-case letters and digits)", truncate(e.SlackUserID, 70))
	}
	if e.Email != "" && !plausibleEmail(e.Email) {
		p.fail("email %q is not an email address", truncate(e.Email, 70))
	}
	for _, f := range []struct {
		name, v string
		max     int
	}{
		{"user_id", e.UserID, session.MaxUserIDLen},
		{"employee_id", e.EmployeeID, session.MaxUserIDLen},
		{"display_name", e.DisplayName, MaxDisplayNameLen},
	} {
		switch {
		case len(f.v) > f.max:
			p.fail("%s is longer than %d bytes", f.name, f.max)
		case !printable(f.v):
			p.fail("%s has control characters", f.name)
		}
	}
	for _, k := range []struct{ field, key string }{
		{"slack_user_id", e.SlackUserID},
		{"user_id", e.UserID},
		{"email", strings.ToLower(e.Email)},
	} {
		if k.key == "" {
			continue
		}
		id := k.field + "\x00" + k.key
		if prev, ok := p.seen[id]; ok {
			p.fail("%s %q is already the key of %s", k.field, truncate(k.key, 70), p.where(prev))
			continue
		}
		p.seen[id] = p.entry
	}
	// A user id is also looked up as an email: it must not be another
	// entry's email.
	if e.UserID != "" {
		uid := strings.ToLower(e.UserID)
		if prev, ok := p.seen["email\x00"+uid]; ok && prev != p.entry {
			p.fail("user_id %q is the email of %s", truncate(e.UserID, 70), p.where(prev))
		}
		p.seen["user_id_lower\x00"+uid] = p.entry
	}
	if e.Email != "" {
		if prev, ok := p.seen["user_id_lower\x00"+strings.ToLower(e.Email)]; ok && prev != p.entry {
			p.fail("email %q is the user_id of %s", truncate(e.Email, 70), p.where(prev))
		}
	}
}

// plausibleEmail reports whether s looks like local@domain: one @, both
// parts non-empty, no spaces or control characters, at most 254 bytes.
func plausibleEmail(s string) bool {
	local, domain, ok := strings.Cut(s, "@")
	return ok && local != "" && domain != "" && !strings.Contains(domain, "@") &&
		len(s) <= maxEmailLen && printable(s) && !strings.ContainsFunc(s, unicode.IsSpace)
}

// printable reports whether s is valid UTF-8 without control characters.
func printable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, unicode.IsControl)
}

// truncate shortens s to at most n bytes for an error message.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// IdentityDirectory is an [IdentityResolver] over a list of
// [IdentityEntry], such as an identities file: it finds the person a
// request names by its slack_user_id, else by its user_id taken as a user
// id and then as an email (without case), and returns the entry's user
// id, employee id, display name and Slack user id — those the entry has:
// an entry's user_id replaces the request's, so one person reached
// through Slack and through another front-end keeps one conversation. A
// request it finds nobody for gets
// [ErrIdentityNotFound]. Lookups read memory only, so it needs no cache.
//
// [IdentityDirectory.Replace] swaps the entries at once, as on a reload.
// It is safe for concurrent use. The zero IdentityDirectory has no
// entries.
type IdentityDirectory struct {
	idx atomic.Pointer[identityIndex]
}

type identityIndex struct {
	entries []IdentityEntry
	bySlack map[string]int
	byUser  map[string]int
	byEmail map[string]int // lower-case
}

// NewIdentityDirectory returns a directory of entries, which must be
// valid as [ParseIdentities] checks them.
func NewIdentityDirectory(entries []IdentityEntry) (*IdentityDirectory, error) {
	d := &IdentityDirectory{}
	if err := d.Replace(entries); err != nil {
		return nil, err
	}
	return d, nil
}

// Replace makes entries the directory's, at once; on an error the
// previous entries stay.
func (d *IdentityDirectory) Replace(entries []IdentityEntry) error {
	p := &identityParser{seen: map[string]int{}}
	idx := &identityIndex{
		entries: append([]IdentityEntry(nil), entries...),
		bySlack: map[string]int{},
		byUser:  map[string]int{},
		byEmail: map[string]int{},
	}
	for i, e := range idx.entries {
		p.entry = i + 1
		p.lines = append(p.lines, 0)
		p.check(&e)
		if e.SlackUserID != "" {
			idx.bySlack[e.SlackUserID] = i
		}
		if e.UserID != "" {
			idx.byUser[e.UserID] = i
		}
		if e.Email != "" {
			idx.byEmail[strings.ToLower(e.Email)] = i
		}
	}
	if err := p.err(); err != nil {
		return err
	}
	d.idx.Store(idx)
	return nil
}

// Len returns the number of entries.
func (d *IdentityDirectory) Len() int {
	if idx := d.idx.Load(); idx != nil {
		return len(idx.entries)
	}
	return 0
}

// ResolveIdentity looks the request's user up (see [IdentityDirectory]).
func (d *IdentityDirectory) ResolveIdentity(_ context.Context, id Identity) (Identity, error) {
	idx := d.idx.Load()
	if idx == nil {
		return Identity{}, ErrIdentityNotFound
	}
	i, ok := idx.find(id)
	if !ok {
		return Identity{}, ErrIdentityNotFound
	}
	e := idx.entries[i]
	return Identity{UserID: e.UserID, EmployeeID: e.EmployeeID, DisplayName: e.DisplayName, SlackUserID: e.SlackUserID}, nil
}

// find returns the entry of id: by Slack user id, else by user id, else
// by user id taken as an email.
func (idx *identityIndex) find(id Identity) (int, bool) {
	if id.SlackUserID != "" {
		if i, ok := idx.bySlack[id.SlackUserID]; ok {
			return i, true
		}
	}
	if id.UserID != "" {
		if i, ok := idx.byUser[id.UserID]; ok {
			return i, true
		}
		if i, ok := idx.byEmail[strings.ToLower(id.UserID)]; ok {
			return i, true
		}
	}
	return 0, false
}
