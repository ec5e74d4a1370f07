package httpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/agentmesh/agentmesh"
	"github.com/agentmesh/agentmesh/discovery"
	"github.com/agentmesh/agentmesh/httpserver"
)

// A mesh control plane on a test listener: register an agent over HTTP
// with the API token, then discover it.
func Example() {
	mesh, err := agentmesh.Open(context.Background(), nil) // registry and discovery in memory
	if err != nil {
		panic(err)
	}
	defer mesh.Close()

	srv, err := httpserver.New(mesh.Registry(), mesh.Engine(), nil, &httpserver.Options{Token: "s3cret"})
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	call := func(method, path, token, body string) (int, string) {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	status, _ := call("POST", "/v1/agents", "s3cret", `{
		"name": "finance",
		"description": "Budgets and cost centers for every department.",
		"capabilities": ["budget", "cost-center"],
		"endpoint": "https://finance.example.com/task"
	}`)
	fmt.Println("register:", status)

	status, body := call("GET", "/v1/discover?query=engineering+budget", "s3cret", "")
	var results []discovery.Result
	_ = json.Unmarshal([]byte(body), &results)
	fmt.Println("discover:", status, results[0].Agent.Name, results[0].MatchedTerms)

	status, body = call("GET", "/v1/agents", "", "")
	var e httpserver.ErrorResponse
	_ = json.Unmarshal([]byte(body), &e)
	fmt.Println("no token:", status, e.Code)
	// Output:
	// register: 201
	// discover: 200 finance [budget]
	// no token: 401 unauthenticated
}
