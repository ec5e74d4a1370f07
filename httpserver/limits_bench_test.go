package httpserver_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/jsonlimit"
)

// hostileBodies are the worst shapes of a request body under the default
// 1 MiB limit, with the status POST /v1/discover answers them with. The
// cost of each must stay linear in its size: a few ms and a few MiB.
func hostileBodies() []struct {
	name   string
	body   []byte
	status int
} {
	const size = httpserver.DefaultMaxBodyBytes - 64
	fill := func(head, unit, sep, tail string) []byte {
		var b bytes.Buffer
		b.WriteString(head)
		for i := 0; b.Len()+len(unit)+len(sep)+len(tail) < size; i++ {
			if i > 0 {
				b.WriteString(sep)
			}
			b.WriteString(strings.ReplaceAll(unit, "#", fmt.Sprint(i)))
		}
		b.WriteString(tail)
		return b.Bytes()
	}
	max := jsonlimit.MaxDepth
	nest := func(depth int) string { return strings.Repeat("[", depth) + strings.Repeat("]", depth) }
	return []struct {
		name   string
		body   []byte
		status int
	}{
		// Many nests of the deepest accepted depth, in one array: every
		// level is walked by the strict-keys pass, then the decoder
		// refuses the type.
		{"deep-at-limit", fill("[", nest(max-1), ",", "]"), http.StatusBadRequest},
		// One level too deep, at the very end: the depth pass reads the
		// whole body before refusing it.
		{"deep-over-limit-at-end", fill(`{"labels":{`, `"k#":"v"`, ",", `},"query":`+nest(max)+`}`), http.StatusBadRequest},
		// 1 MiB of '[': refused at byte 65.
		{"deep-over-limit-1MiB", bytes.Repeat([]byte("["), size), http.StatusBadRequest},
		// A flat object of ~60k keys, each walked and decoded.
		{"flat-object-many-keys", fill(`{"query":"budget","labels":{`, `"k#":"v"`, ",", `}}`), http.StatusOK},
		// An array of ~100k small objects, each decoded on its own.
		{"array-of-small-objects", fill(`{"query":"budget","resources":[`, `{"uri":"r#"}`, ",", `]}`), http.StatusOK},
	}
}

// BenchmarkHostileBodies posts each of hostileBodies to POST
// /v1/discover on a server of 10 agents.
func BenchmarkHostileBodies(b *testing.B) {
	srv := benchServer(b, 10)
	for _, c := range hostileBodies() {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(c.body)))
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/v1/discover", bytes.NewReader(c.body))
				r.Header.Set("Authorization", "Bearer "+adminToken)
				r.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, r)
				if w.Code != c.status {
					b.Fatalf("%d, want %d: %.300s", w.Code, c.status, w.Body)
				}
			}
		})
	}
}
