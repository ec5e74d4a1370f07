// Command delegation shows agentmesh delegating tasks: it starts two local
// agents — "finance" answers at once (HTTP 200), "reports" accepts the
// task (HTTP 202) and posts its result to the mesh's callback URL a moment
// later — registers them, delegates to both, waits for the async one, and
// prints the delegation records, which a bbolt file keeps.
//
//	go run ./examples/delegation          # uses a temporary directory
//	go run ./examples/delegation -db mesh.db
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh"
	"github.com/agentmesh/agentmesh/delegation"
	"github.com/agentmesh/agentmesh/registry"
)

func main() {
	dbPath := flag.String("db", "", "bbolt file for agents and records (default: a temporary directory)")
	flag.Parse()
	if err := run(*dbPath); err != nil {
		log.Fatal(err)
	}
}

func run(dbPath string) error {
	ctx := context.Background()
	if dbPath == "" {
		dir, err := os.MkdirTemp("", "agentmesh-delegation-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		dbPath = filepath.Join(dir, "mesh.db")
	}
	// The mesh's HTTP server: here only the callback endpoint. In
	// `agentmesh serve` the HTTP front-end mounts it among the others.
	mux := http.NewServeMux()
	server := httptest.NewServer(mux)
	defer server.Close()
	mesh, err := agentmesh.Open(ctx, &agentmesh.Options{Path: dbPath, PublicURL: server.URL})
	if err != nil {
		return err
	}
	defer mesh.Close()
	reg, client := mesh.Registry(), mesh.Delegation()
	mux.Handle("POST /v1/delegations/{id}/result", client.CallbackHandler(nil))

	finance := httptest.NewServer(http.HandlerFunc(financeAgent))
	defer finance.Close()
	var callbacks sync.WaitGroup
	defer callbacks.Wait()
	reports := httptest.NewServer(reportsAgent(&callbacks))
	defer reports.Close()

	for _, a := range []registry.Agent{
		{Name: "finance", Description: "Budgets and cost centers", Capabilities: []string{"budget"}, Endpoint: finance.URL + "/task",
			Auth: &registry.Auth{Type: registry.AuthBearer, Token: "finance-secret"}},
		{Name: "reports", Description: "Writes quarterly reports", Capabilities: []string{"report"}, Endpoint: reports.URL + "/task"},
	} {
		if _, _, err := reg.Register(ctx, a); err != nil {
			return err
		}
	}

	direct, err := client.Delegate(ctx, delegation.Request{
		Target: "finance", Task: "Get budget and cost center for Engineering", SourceAgent: "hr-agent",
	})
	if err != nil {
		return err
	}
	later, err := client.Delegate(ctx, delegation.Request{
		Target: "reports", Task: "Write the Q3 report", Async: true, AsyncTimeout: time.Minute,
	})
	if err != nil {
		return err
	}
	fmt.Printf("reports answered: %s (callback expected before %s)\n", later.Status, later.Deadline.Format(time.RFC3339))
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if later, err = client.Wait(waitCtx, later.ID); err != nil {
		return err
	}

	// The records, as GET /v1/delegations/{id} shows them.
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	for _, rec := range []delegation.Record{direct, later} {
		if err := enc.Encode(rec); err != nil {
			return err
		}
	}
	list, err := client.List(ctx, delegation.ListFilter{})
	if err != nil {
		return err
	}
	fmt.Printf("%d records in %s, newest first:", len(list), dbPath)
	for _, rec := range list {
		fmt.Printf(" %s/%s", rec.TargetAgent, rec.Status)
	}
	fmt.Println()
	return nil
}

// financeAgent answers POST /task at once.
func financeAgent(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer finance-secret" {
		http.Error(w, "who are you?", http.StatusUnauthorized)
		return
	}
	var task struct {
		Task    string         `json:"task"`
		Context map[string]any `json:"context"`
	}
	if err := json.NewDecoder(r.Body).Decode(&task); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"result": map[string]any{"department": "Engineering", "budget": 1200000, "costCenter": "ENG-42", "chain": task.Context["chain"]},
	})
}

// reportsAgent accepts the task and calls back later.
func reportsAgent(callbacks *sync.WaitGroup) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var task struct {
			Task        string `json:"task"`
			CallbackURL string `json:"callbackUrl"`
		}
		if err := json.NewDecoder(r.Body).Decode(&task); err != nil || task.CallbackURL == "" {
			http.Error(w, "need a task and a callbackUrl", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusAccepted)
		callbacks.Go(func() {
			time.Sleep(100 * time.Millisecond) // the work
			body, _ := json.Marshal(map[string]any{"status": "completed", "result": "Q3 report: revenue up 12%, 14 pages"})
			resp, err := http.Post(task.CallbackURL, "application/json", bytes.NewReader(body))
			if err != nil {
				log.Printf("reports: callback: %v", err)
				return
			}
			resp.Body.Close()
		})
	}
}
