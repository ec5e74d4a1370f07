package httpserver_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/agentmesh/agentmesh/httpserver"
)

// FuzzHandler sends arbitrary bodies and query strings to the routes that
// parse input, through the whole handler: no panic, no 5xx, and every
// error is a JSON body with a code.
func FuzzHandler(f *testing.F) {
	e := newEnv(f, envConfig{noDelegation: true})
	routes := []struct{ method, path string }{
		{http.MethodPost, "/v1/agents"},
		{http.MethodPost, "/v1/discover"},
		{http.MethodGet, "/v1/discover"},
		{http.MethodGet, "/v1/agents"},
		{http.MethodGet, "/v1/agents/"},
		{http.MethodPost, "/v1/agents/"},
	}
	f.Add(uint8(0), "", []byte(`{"name":"fuzz","description":"d","capabilities":["x"],"endpoint":"http://127.0.0.1:9"}`))
	f.Add(uint8(1), "", []byte(`{"query":"budget","requiredResources":[{"uri":"a"}]}`))
	f.Add(uint8(2), "query=budget&resources=%5B%7B%22uri%22%3A%22x%22%7D%5D&label=a=b", []byte(nil))
	f.Add(uint8(3), "limit=1&cursor=YQ", []byte(nil))
	f.Add(uint8(4), "..%2f", []byte(nil))
	f.Add(uint8(5), "fuzz/heartbeat", []byte(`{}`))
	f.Fuzz(func(t *testing.T, route uint8, extra string, body []byte) {
		rt := routes[int(route)%len(routes)]
		target := rt.path
		switch {
		case rt.path[len(rt.path)-1] == '/':
			target += extra
		case extra != "":
			target += "?" + extra
		}
		r, err := http.NewRequest(rt.method, "http://mesh"+target, bytes.NewReader(body))
		if err != nil {
			t.Skip()
		}
		r.Header.Set("Authorization", "Bearer "+adminToken)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		e.srv.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s %q: %d %s", rt.method, target, w.Code, w.Body)
		}
		if w.Code >= 400 {
			var er httpserver.ErrorResponse
			if err := json.Unmarshal(w.Body.Bytes(), &er); err != nil || er.Code == "" || er.Error == "" {
				t.Fatalf("%s %q: %d with body %q", rt.method, target, w.Code, w.Body)
			}
		}
	})
}
