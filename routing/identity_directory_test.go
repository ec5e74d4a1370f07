package routing

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const identitiesYAML = `# who is who
- slack_user_id: U024BE7LH
  user_id: ada
  email: Ada@Example.com
  employee_id: E1001
  display_name: Ada Lovelace
- slack_user_id: W012A3CDE
  employee_id: 1002        # a number is its digits
- email: grace@example.com
  employee_id: E1003
  display_name: Grace Hopper
`

func TestParseIdentities(t *testing.T) {
	entries, err := ParseIdentities([]byte(identitiesYAML))
	require.NoError(t, err)
	assert.Equal(t, []IdentityEntry{
		{SlackUserID: "U024BE7LH", UserID: "ada", Email: "Ada@Example.com", EmployeeID: "E1001", DisplayName: "Ada Lovelace"},
		{SlackUserID: "W012A3CDE", EmployeeID: "1002"},
		{Email: "grace@example.com", EmployeeID: "E1003", DisplayName: "Grace Hopper"},
	}, entries)

	// JSON is YAML too.
	entries, err = ParseIdentities([]byte(`[{"slack_user_id": "U1AB", "employee_id": "E9", "display_name": "Jo"}]`))
	require.NoError(t, err)
	assert.Equal(t, []IdentityEntry{{SlackUserID: "U1AB", EmployeeID: "E9", DisplayName: "Jo"}}, entries)

	for _, empty := range []string{"", "\n# nobody yet\n", "null", "[]", "~"} {
		entries, err := ParseIdentities([]byte(empty))
		require.NoError(t, err, "%q", empty)
		assert.Empty(t, entries, "%q", empty)
	}
}

func TestParseIdentitiesErrors(t *testing.T) {
	for name, tc := range map[string]struct{ file, want string }{
		"not a list":      {"slack_user_id: U1AB\n", "line 1: the file must be a list of entries"},
		"entry not a map": {"- U1AB\n", "entry 1 (line 1): must be a mapping"},
		"unknown field":   {"- slack_user_id: U1AB\n  employee_id: E1\n  employe_id: E1\n", `entry 1 (line 1): unknown field "employe_id"`},
		"repeated field":  {"- slack_user_id: U1AB\n  employee_id: E1\n  employee_id: E2\n", "entry 1 (line 1): field employee_id given twice"},
		"not a string":    {"- slack_user_id: U1AB\n  employee_id: [E1]\n", "entry 1 (line 1): employee_id must be a string"},
		"null value":      {"- slack_user_id: U1AB\n  employee_id: ~\n", "employee_id must be a string"},
		"bool value":      {"- slack_user_id: U1AB\n  employee_id: true\n", "employee_id must be a string"},
		"alias value":     {"- slack_user_id: &s U1AB\n  employee_id: *s\n", "employee_id must be a string"},
		"no key":          {"- employee_id: E1\n", "entry 1 (line 1): needs slack_user_id, user_id or email"},
		"no employee":     {"- slack_user_id: U1AB\n  display_name: Jo\n", "entry 1 (line 1): employee_id is required"},
		"bad slack id":    {"- slack_user_id: u1ab\n  employee_id: E1\n", `entry 1 (line 1): slack_user_id "u1ab" is not a Slack user id`},
		"bad email":       {"- email: nobody\n  employee_id: E1\n", `entry 1 (line 1): email "nobody" is not an email address`},
		"email spaces":    {"- email: a b@c\n  employee_id: E1\n", "is not an email address"},
		"long name":       {"- user_id: u\n  employee_id: E1\n  display_name: " + strings.Repeat("n", MaxDisplayNameLen+1) + "\n", "display_name is longer than 512 bytes"},
		"control char":    {"- user_id: \"u\\x01\"\n  employee_id: E1\n", "user_id has control characters"},
		"duplicate slack": {"- slack_user_id: U1AB\n  employee_id: E1\n- slack_user_id: U1AB\n  employee_id: E2\n", `entry 2 (line 3): slack_user_id "U1AB" is already the key of entry 1 (line 1)`},
		"duplicate email": {"- email: A@b.c\n  employee_id: E1\n- email: a@B.C\n  employee_id: E2\n", `entry 2 (line 3): email "a@b.c" is already the key of entry 1 (line 1)`},
		"two documents":   {"- user_id: u\n  employee_id: E1\n---\n- user_id: v\n  employee_id: E2\n", "more than one YAML document"},
		"bad yaml":        {"- user_id: [u\n", "routing: identities: yaml:"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseIdentities([]byte(tc.file))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}

	// Every problem is listed, up to a bound.
	var b strings.Builder
	for range 30 {
		b.WriteString("- employee_id: E1\n")
	}
	_, err := ParseIdentities([]byte(b.String()))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "entry 20 (line 20)")
	assert.NotContains(t, err.Error(), "entry 21 ")
	assert.Contains(t, err.Error(), "and 10 more")
}

func TestIdentityDirectory(t *testing.T) {
	ctx := context.Background()
	entries, err := ParseIdentities([]byte(identitiesYAML))
	require.NoError(t, err)
	d, err := NewIdentityDirectory(entries)
	require.NoError(t, err)
	assert.Equal(t, 3, d.Len())

	for name, tc := range map[string]struct {
		in   Identity
		want Identity
	}{
		"by slack id": {Identity{SlackUserID: "U024BE7LH"}, Identity{UserID: "ada", EmployeeID: "E1001", DisplayName: "Ada Lovelace", SlackUserID: "U024BE7LH"}},
		"by user id":  {Identity{UserID: "ada"}, Identity{UserID: "ada", EmployeeID: "E1001", DisplayName: "Ada Lovelace", SlackUserID: "U024BE7LH"}},
		"by email":    {Identity{UserID: "GRACE@example.com"}, Identity{EmployeeID: "E1003", DisplayName: "Grace Hopper"}},
		"slack first": {Identity{SlackUserID: "W012A3CDE", UserID: "ada"}, Identity{EmployeeID: "1002", SlackUserID: "W012A3CDE"}},
		"slack unknown, user id known": {Identity{SlackUserID: "U999", UserID: "ada"},
			Identity{UserID: "ada", EmployeeID: "E1001", DisplayName: "Ada Lovelace", SlackUserID: "U024BE7LH"}},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := d.ResolveIdentity(ctx, tc.in)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
	for _, unknown := range []Identity{{SlackUserID: "U999"}, {UserID: "bob"}, {EmployeeID: "E1001"}, {}} {
		_, err := d.ResolveIdentity(ctx, unknown)
		require.ErrorIs(t, err, ErrIdentityNotFound, "%+v", unknown)
	}

	// Replace swaps at once; a bad list keeps the previous one.
	require.Error(t, d.Replace([]IdentityEntry{{UserID: "x", EmployeeID: "1"}, {UserID: "x", EmployeeID: "2"}}))
	assert.Equal(t, 3, d.Len())
	require.NoError(t, d.Replace([]IdentityEntry{{UserID: "bob", EmployeeID: "E2"}}))
	assert.Equal(t, 1, d.Len())
	got, err := d.ResolveIdentity(ctx, Identity{UserID: "bob"})
	require.NoError(t, err)
	assert.Equal(t, "E2", got.EmployeeID)
	_, err = d.ResolveIdentity(ctx, Identity{SlackUserID: "U024BE7LH"})
	require.ErrorIs(t, err, ErrIdentityNotFound)

	var zero IdentityDirectory
	_, err = zero.ResolveIdentity(ctx, Identity{UserID: "bob"})
	require.ErrorIs(t, err, ErrIdentityNotFound)
	assert.Zero(t, zero.Len())
}

// FuzzParseIdentities: the parser never panics, and whatever it accepts
// is a valid directory whose every entry is found by its keys, with an
// identity within the request limits.
func FuzzParseIdentities(f *testing.F) {
	f.Add([]byte(identitiesYAML))
	f.Add([]byte(`[{"slack_user_id":"U1AB","employee_id":"E9"}]`))
	f.Add([]byte("- email: a@b\n  employee_id: 1\n- email: A@B\n  employee_id: 2\n"))
	f.Add([]byte("- &a {user_id: x, employee_id: y}\n- *a\n"))
	f.Add([]byte("- user_id: x\n  employee_id: y\n  <<: {display_name: z}\n"))
	f.Add([]byte("null"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := ParseIdentities(data)
		if err != nil {
			return
		}
		d, err := NewIdentityDirectory(entries)
		require.NoError(t, err, "accepted entries must make a directory")
		for _, e := range entries {
			for _, in := range []Identity{{SlackUserID: e.SlackUserID}, {UserID: e.UserID}, {UserID: e.Email}} {
				if in.IsZero() {
					continue
				}
				got, err := d.ResolveIdentity(context.Background(), in)
				require.NoError(t, err, "%+v", in)
				require.Equal(t, e.EmployeeID, got.EmployeeID)
				require.NoError(t, got.check())
			}
		}
	})
}
