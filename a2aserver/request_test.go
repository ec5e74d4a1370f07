package a2aserver

import (
	"testing"
	"time"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentmesh/agentmesh/a2acard"
)

func TestParseIntent(t *testing.T) {
	msg := func(meta map[string]any, parts ...*a2a.Part) *a2a.Message {
		if len(parts) == 0 {
			parts = []*a2a.Part{a2a.NewTextPart("Budget of")} // joined with the next part
		}
		m := a2a.NewMessage(a2a.MessageRoleUser, parts...)
		m.Metadata = meta
		return m
	}
	for _, tc := range []struct {
		name    string
		msg     *a2a.Message
		reqMeta map[string]any
		want    intent
	}{
		{
			name: "default is delegation",
			msg:  msg(nil, a2a.NewTextPart("Budget of"), a2a.NewTextPart("Engineering?")),
			want: intent{skill: a2acard.SkillDelegate, text: "Budget of\nEngineering?"},
		},
		{
			name: "delegation options",
			msg: msg(map[string]any{
				MetaSkill: a2acard.SkillDelegate, MetaTarget: " finance ", "depth": 1.0, "chain": []any{"hr"},
				MetaSourceAgent: "hr", MetaTimeoutMs: 1500.0,
			}),
			want: intent{skill: a2acard.SkillDelegate, text: "Budget of", target: "finance", context: map[string]any{"depth": 1.0, "chain": []any{"hr"}}, source: "hr", timeout: 1500 * time.Millisecond},
		},
		{
			name: "discovery",
			msg:  msg(map[string]any{MetaSkill: a2acard.SkillDiscover, MetaLimit: 3.0, "customer": "acme"}),
			want: intent{skill: a2acard.SkillDiscover, text: "Budget of", limit: 3}, // no context
		},
		{
			name:    "request metadata, message wins",
			msg:     msg(map[string]any{MetaQuery: "budget"}),
			reqMeta: map[string]any{MetaQuery: "payroll", MetaTimeoutMs: 10.0},
			want:    intent{skill: a2acard.SkillDelegate, text: "Budget of", query: "budget", timeout: 10 * time.Millisecond},
		},
		{
			name: "reply",
			msg:  func() *a2a.Message { m := msg(nil); m.TaskID = "t1"; return m }(),
			want: intent{skill: a2acard.SkillDelegate, text: "Budget of", reply: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseIntent(tc.msg, tc.reqMeta)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestParseIntentRefuses(t *testing.T) {
	reply := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Q3"))
	reply.TaskID = "t1"
	for _, tc := range []struct {
		name string
		msg  *a2a.Message
		meta map[string]any
		want string
	}{
		{name: "no message", want: "invalid_argument: the request has no message"},
		{name: "nil part", msg: a2a.NewMessage(a2a.MessageRoleUser, nil), want: "message part 1 is empty"},
		{name: "discovery reply", msg: reply, meta: map[string]any{MetaSkill: a2acard.SkillDiscover}, want: "cannot use the mesh.discover skill"},
		{name: "reply with a target", msg: reply, meta: map[string]any{MetaTarget: "hr"}, want: "do not apply to a message that continues a task"},
		{name: "limit not a number", msg: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x")), meta: map[string]any{MetaSkill: a2acard.SkillDiscover, MetaLimit: "3"}, want: "agentmesh/limit: must be an integer"},
		{name: "timeout too long", msg: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("x")), meta: map[string]any{MetaTimeoutMs: 3600001.0}, want: "agentmesh/timeoutMs: must be an integer from 1 to 3600000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseIntent(tc.msg, tc.meta)
			require.ErrorIs(t, err, a2a.ErrInvalidParams)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
