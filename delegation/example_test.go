package delegation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
	"github.com/agentmesh/agentmesh/store/memstore"
)

// Two agents: "finance" answers at once (200), "reports" accepts the task
// (202) and posts its result to the callback URL later. The mesh's HTTP
// server mounts the callback handler; Wait returns the async record once
// the callback has completed it.
func Example() {
	ctx := context.Background()
	store := memstore.New() // agents and delegation records
	reg, err := registry.New(ctx, store, nil)
	if err != nil {
		panic(err)
	}
	defer reg.Close()

	// The mesh's own HTTP server, for callbacks.
	mux := http.NewServeMux()
	mesh := httptest.NewServer(mux)
	defer mesh.Close()
	client, err := delegation.New(ctx, reg, store, &delegation.Options{PublicURL: mesh.URL})
	if err != nil {
		panic(err)
	}
	defer client.Close()
	mux.Handle("POST /v1/delegations/{id}/result", client.CallbackHandler(nil))

	// Agent 1: answers 200 with a result.
	finance := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"result": {"budget": 1200000, "costCenter": "ENG-42"}}`)
	}))
	defer finance.Close()

	// Agent 2: answers 202, then calls back (once the example has printed
	// the accepted record, to keep the output stable).
	var callbacks sync.WaitGroup
	defer callbacks.Wait()
	printed := make(chan struct{})
	reports := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var task struct {
			CallbackURL string `json:"callbackUrl"`
		}
		_ = json.NewDecoder(r.Body).Decode(&task)
		w.WriteHeader(http.StatusAccepted)
		callbacks.Go(func() {
			<-printed
			body := `{"status": "completed", "result": "Q3 report: 14 pages"}`
			resp, err := http.Post(task.CallbackURL, "application/json", bytes.NewBufferString(body))
			if err == nil {
				resp.Body.Close()
			}
		})
	}))
	defer reports.Close()

	for name, url := range map[string]string{"finance": finance.URL, "reports": reports.URL} {
		if _, _, err := reg.Register(ctx, registry.Agent{Name: name, Description: name + " agent", Endpoint: url + "/task"}); err != nil {
			panic(err)
		}
	}

	direct, err := client.Delegate(ctx, delegation.Request{Target: "finance", Task: "Budget for Engineering?", SourceAgent: "hr-agent"})
	if err != nil {
		panic(err)
	}
	later, err := client.Delegate(ctx, delegation.Request{Target: "reports", Task: "Write the Q3 report", Async: true})
	if err != nil {
		panic(err)
	}
	fmt.Println(later.TargetAgent, later.Status)
	close(printed)
	later, err = client.Wait(ctx, later.ID)
	if err != nil {
		panic(err)
	}
	for _, rec := range []delegation.Record{direct, later} {
		fmt.Printf("%s: %s, attempts %d, depth %d, result %s\n", rec.TargetAgent, rec.Status, rec.Attempts, rec.Depth, rec.Result)
	}
	// Output:
	// reports accepted
	// finance: completed, attempts 1, depth 1, result {"budget": 1200000, "costCenter": "ENG-42"}
	// reports: completed, attempts 1, depth 1, result "Q3 report: 14 pages"
}

// A Go function as an agent: register the agent with protocol inprocess
// and its handler with Handle.
func ExampleClient_Handle() {
	ctx := context.Background()
	store := memstore.New()
	reg, _ := registry.New(ctx, store, nil)
	defer reg.Close()
	client, _ := delegation.New(ctx, reg, store, nil)
	defer client.Close()

	client.Handle("echo", func(ctx context.Context, task delegation.Task) (any, error) {
		return map[string]any{"echo": task.Task, "depth": task.Context["depth"]}, nil
	})
	_, _, err := reg.Register(ctx, registry.Agent{Name: "echo", Description: "repeats the task", Protocol: registry.ProtocolInProcess})
	if err != nil {
		panic(err)
	}
	rec, err := client.Delegate(ctx, delegation.Request{Target: "echo", Task: "hello"})
	if err != nil {
		panic(err)
	}
	fmt.Println(rec.Status, string(rec.Result))

	_, err = client.Delegate(ctx, delegation.Request{Target: "echo", Task: "again", Context: map[string]any{"depth": 5}})
	fmt.Println(delegation.Code(err), err)
	// Output:
	// completed {"depth":1,"echo":"hello"}
	// depth_exceeded delegation: maximum delegation depth reached: context.depth is 5, the limit is 5 hops
}
