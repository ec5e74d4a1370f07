package principal_test

import (
	"context"
	"testing"

	"github.com/agentmesh/agentmesh/principal"
)

func TestOwns(t *testing.T) {
	cases := []struct {
		p     principal.Principal
		owner string
		want  bool
	}{
		{principal.Principal{Name: "a"}, "a", true},
		{principal.Principal{Name: "a"}, "b", false},
		{principal.Principal{Name: "a"}, "", false},
		{principal.Principal{Name: principal.Default}, "", true},
		{principal.Principal{}, "", true},
		{principal.Principal{}, principal.Default, true},
		{principal.Principal{}, "a", false},
		{principal.Principal{Name: "a", Admin: true}, "b", true},
	}
	for _, c := range cases {
		if got := c.p.Owns(c.owner); got != c.want {
			t.Errorf("%+v.Owns(%q) = %v, want %v", c.p, c.owner, got, c.want)
		}
	}
}

func TestFilter(t *testing.T) {
	bg := context.Background()
	if got := principal.Filter(bg); got != "" {
		t.Errorf("Filter(no principal) = %q, want every principal", got)
	}
	if got := principal.Filter(principal.NewContext(bg, principal.Principal{Name: "a", Admin: true})); got != "" {
		t.Errorf("Filter(admin) = %q, want every principal", got)
	}
	if got := principal.Filter(principal.NewContext(bg, principal.Principal{Name: "a"})); got != "a" {
		t.Errorf("Filter(a) = %q, want a", got)
	}
	if got := principal.Filter(principal.NewContext(bg, principal.Principal{})); got != principal.Default {
		t.Errorf("Filter(unnamed) = %q, want %q", got, principal.Default)
	}
}
