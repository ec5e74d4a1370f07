package httpserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/jsonlimit"
	"github.com/agentmesh/agentmesh/routing"
)

// hostileBody is one of the worst shapes of a request body under the
// default 1 MiB limit, for one route, with the status it is answered
// with (any of them).
type hostileBody struct {
	route, name string
	body        []byte
	status      []int
}

// hostileSize is the size of every hostile body: just under the limit.
const hostileSize = httpserver.DefaultMaxBodyBytes - 64

// fill is head, then unit (its '#' replaced by a counter) repeated with
// sep between while the body stays under size, then tail.
func fill(size int, head, unit, sep, tail string) []byte {
	var b bytes.Buffer
	b.WriteString(head)
	for i := 0; b.Len()+len(unit)+len(sep)+len(tail)+8 < size; i++ {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(strings.ReplaceAll(unit, "#", fmt.Sprint(i)))
	}
	b.WriteString(tail)
	return b.Bytes()
}

// pad fills body to hostileSize with spaces before its last byte.
func pad(body string) []byte {
	n := hostileSize - len(body)
	return []byte(body[:len(body)-1] + strings.Repeat(" ", max(n, 0)) + body[len(body)-1:])
}

// hostileBodies are the worst bodies of each route's shape: the deepest
// nesting, the most keys and items, the largest free-form values, each
// at the limit (accepted by the decoder) and past it (refused). The cost
// of each must stay linear in its size: a few ms and a few MiB.
func hostileBodies() []hostileBody {
	const size = hostileSize
	max := jsonlimit.MaxDepth
	nest := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	long := func(n int) string { return strings.Repeat("a", n) }
	ok, bad, notFound := []int{http.StatusOK}, []int{http.StatusBadRequest}, []int{http.StatusNotFound}
	// An agent record with every list at its limit, each item at its
	// longest: valid, and padded to the size.
	var agent strings.Builder
	agent.WriteString(`{"name":"big","description":"` + long(5000) + `","endpoint":"https://agents.example.com/task","capabilities":[`)
	for i := range 64 {
		agent.WriteString(fmt.Sprintf(`%s"c%03d%s"`, map[bool]string{true: ",", false: ""}[i > 0], i, long(124)))
	}
	agent.WriteString(`],"examples":[`)
	for i := range 200 {
		agent.WriteString(fmt.Sprintf(`%s"e%03d %s"`, map[bool]string{true: ",", false: ""}[i > 0], i, long(495)))
	}
	agent.WriteString(`],"resources":[`)
	for i := range 64 {
		agent.WriteString(fmt.Sprintf(`%s{"uri":"https://r.example.com/%03d/%s","description":"%s","access":"read"}`,
			map[bool]string{true: ",", false: ""}[i > 0], i, long(2000), long(1000)))
	}
	agent.WriteString(`],"labels":{`)
	for i := range 32 {
		agent.WriteString(fmt.Sprintf(`%s"l%02d":"%s"`, map[bool]string{true: ",", false: ""}[i > 0], i, long(256)))
	}
	agent.WriteString(`}}`)
	// 9,000 values of context at the depth limit, then a long string.
	nested := fill(18000, `{"a":[`, nest(max-3), ",", `]`)
	return []hostileBody{
		// POST /v1/discover.
		// Many nests of the deepest accepted depth, in one array: the
		// decoder refuses the type.
		{"/v1/discover", "deep-at-limit", fill(size, "[", nest(max-1), ",", "]"), bad},
		// One level too deep, at the very end: the depth check reads the
		// whole body before refusing it.
		{"/v1/discover", "deep-over-limit-at-end", fill(size, `{"query":"x","scorer":"`, "a", "", `","labels":`+nest(max)+`}`), bad},
		// 1 MiB of '[': refused at byte 65.
		{"/v1/discover", "deep-over-limit-1MiB", bytes.Repeat([]byte("["), size), bad},
		// A flat object of ~100k labels: over the limit of 32.
		{"/v1/discover", "labels-many", fill(size, `{"query":"budget","labels":{`, `"k#":"v"`, ",", `}}`), bad},
		// 32 labels of 32 KiB values.
		{"/v1/discover", "labels-at-limit", fill(size, `{"query":"budget","labels":{`, `"k#":"`+long(32000)+`"`, ",", `}}`), ok},
		// An array of ~85k small objects: over the limit of 64 resources.
		{"/v1/discover", "resources-many", fill(size, `{"query":"budget","resources":[`, `{"uri":"r#"}`, ",", `]}`), bad},
		// 64 resources of 16 KiB URIs.
		{"/v1/discover", "resources-at-limit", fill(size, `{"query":"budget","resources":[`, `{"uri":"/r#/`+long(16300)+`"}`, ",", `]}`), ok},
		// A query of 1 MiB of words: over the limit of 10,000 characters,
		// refused before it is tokenized.
		{"/v1/discover", "query-1MiB-words", fill(size, `{"query":"`, "budget#", " ", `"}`), bad},
		// A query of almost 10,000 characters of words, the body padded
		// with spaces: about the longest accepted, for the tokenizer and
		// the index.
		{"/v1/discover", "query-at-limit", pad(string(fill(10000, `{"query":"`, "budget#", " ", `"}`))), ok},
		// POST /v1/agents.
		// An agent record at every limit, padded with spaces.
		{"/v1/agents", "agent-at-limits", pad(agent.String()), []int{http.StatusOK, http.StatusCreated}},
		// ~100k capabilities: over the limit of 64.
		{"/v1/agents", "capabilities-many", fill(size, `{"name":"big","description":"d","endpoint":"https://agents.example.com/task","capabilities":[`, `"c#"`, ",", `]}`), bad},
		// A description of 1 MiB: over its limit of 5000 characters.
		{"/v1/agents", "description-1MiB", fill(size, `{"name":"big","endpoint":"https://agents.example.com/task","description":"`, "a", "", `"}`), bad},
		// POST /v1/delegate (to an agent that does not exist: 404 once
		// decoded).
		// A context of ~90k keys: over the free-form budget.
		{"/v1/delegate", "context-many-keys", fill(size, `{"targetName":"nobody","task":"t","context":{`, `"k#":1`, ",", `}}`), bad},
		// A context of ~500k numbers in one array: over the budget.
		{"/v1/delegate", "context-many-numbers", fill(size, `{"targetName":"nobody","task":"t","context":{"a":[`, `1`, ",", `]}}`), bad},
		// A context of 9,999 keys (the budget) with long values.
		{"/v1/delegate", "context-keys-at-budget", fill(size, `{"targetName":"nobody","task":"t","context":{`, `"k#":"`+long(95)+`"`, ",", `}}`), notFound},
		// A context of ~9,000 values nested to the depth limit, and a
		// long string.
		{"/v1/delegate", "context-nested-at-budget", fill(size, `{"targetName":"nobody","task":"t","context":`+string(nested)+`,"b":"`, "a", "", `"}}`), notFound},
		// POST /v1/request.
		// Metadata of ~90k keys: over the budget.
		{"/v1/request", "metadata-many-keys", fill(size, `{"input":"hello","metadata":{`, `"k#":true`, ",", `}}`), bad},
	}
}

// nopRouter answers every request, without looking at it.
type nopRouter struct{}

func (nopRouter) Handle(context.Context, routing.Request) (routing.Response, error) {
	return routing.Response{}, nil
}

// BenchmarkHostileBodies posts each of hostileBodies to its route on a
// server with delegation and a router that answers at once. Each
// reports, besides ns/op and B/op, x-string: its time over that of
// decoding a plain 1 MiB JSON string, measured first in the same run, so
// that the figure does not depend on the machine.
func BenchmarkHostileBodies(b *testing.B) {
	e := newEnv(b, envConfig{opts: func(o *httpserver.Options) { o.Router = nopRouter{} }})
	var refNs float64
	b.Run("string-1MiB-reference", func(b *testing.B) {
		body, _ := json.Marshal(strings.Repeat("a", hostileSize-2))
		b.ReportAllocs()
		b.SetBytes(int64(len(body)))
		for b.Loop() {
			var s string
			if err := json.Unmarshal(body, &s); err != nil {
				b.Fatal(err)
			}
		}
		refNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
	})
	for _, c := range hostileBodies() {
		b.Run(strings.TrimPrefix(c.route, "/v1/")+"/"+c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, c.route, bytes.NewReader(c.body))
				r.Header.Set("Authorization", "Bearer "+adminToken)
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				e.srv.ServeHTTP(w, r)
				if !slices.Contains(c.status, w.Code) {
					b.Fatalf("%d, want %v: %.300s", w.Code, c.status, w.Body)
				}
			}
			if refNs > 0 {
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/refNs, "x-string")
			}
		})
	}
}
