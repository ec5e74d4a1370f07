package httpserver_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestRegisterThenDiscover: a registration the server acknowledged is
// found by the same client's next discover, and a deletion is gone from
// it, although the discovery index is updated off the request's path.
// Several clients at once, on bbolt (group commits), many times over.
func TestRegisterThenDiscover(t *testing.T) {
	e := newEnv(t, envConfig{bolt: true})
	client := e.ts.Client()
	call := func(method, path, token string, body any) (int, []byte, error) {
		var rd io.Reader
		if body != nil {
			b, err := json.Marshal(body)
			if err != nil {
				return 0, nil, err
			}
			rd = bytes.NewReader(b)
		}
		req, err := http.NewRequest(method, e.ts.URL+path, rd)
		if err != nil {
			return 0, nil, err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := client.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		return res.StatusCode, b, err
	}
	found := func(word, name string) (bool, error) {
		status, body, err := call("GET", "/v1/discover?limit=50&query="+url.QueryEscape(word), readToken, nil)
		if err != nil {
			return false, err
		}
		if status != 200 {
			return false, fmt.Errorf("discover %q: HTTP %d %s", word, status, body)
		}
		var res []struct{ Agent struct{ Name string } }
		if err := json.Unmarshal(body, &res); err != nil {
			return false, err
		}
		for _, r := range res {
			if r.Agent.Name == name {
				return true, nil
			}
		}
		return false, nil
	}

	const clients, rounds = 6, 25
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := range rounds {
				name := fmt.Sprintf("ryw-%d-%d", c, i)
				word := ownWord(c*rounds + i) // one agent's own word
				body := agentJSON(name, "https://agent.example.com/task", "widgets")
				body["description"] = "Handles " + word + " requests."
				status, b, err := call("POST", "/v1/agents", registerToken, body)
				if !assert.NoError(t, err) || !assert.Equal(t, 201, status, "%s", b) {
					return
				}
				ok, err := found(word, name)
				if !assert.NoError(t, err) || !assert.True(t, ok, "%s is discoverable right after its registration", name) {
					return
				}
				// A replacement's new text, then a deletion, are seen at once too.
				word2 := ownWord(c*rounds + i + 1000)
				body["description"] = "Handles " + word2 + " requests."
				status, b, err = call("POST", "/v1/agents", registerToken, body)
				if !assert.NoError(t, err) || !assert.Equal(t, 200, status, "%s", b) {
					return
				}
				ok, err = found(word2, name)
				if !assert.NoError(t, err) || !assert.True(t, ok, "%s's new description is searched right after the replacement", name) {
					return
				}
				if i%2 == 0 {
					status, b, err = call("DELETE", "/v1/agents/"+name, registerToken, nil)
					if !assert.NoError(t, err) || !assert.Equal(t, 204, status, "%s", b) {
						return
					}
					ok, err = found(word2, name)
					if !assert.NoError(t, err) || !assert.False(t, ok, "%s is gone right after its deletion", name) {
						return
					}
				}
			}
		})
	}
	wg.Wait()
	assert.Equal(t, clients*(rounds/2), e.engine.Len(), "the odd rounds' agents stay")
}

// ownWord is a made-up word of letters only (digits would split it into
// words other agents share), different for each n.
func ownWord(n int) string {
	b := []byte("qj")
	x := uint32(n)*2654435761 + 12345
	for range 8 {
		b = append(b, byte('a'+x%26))
		x = x*1103515245 + 12345
	}
	return string(b) + fmt.Sprintf("%c%c", 'a'+n%26, 'a'+n/26%26)
}
