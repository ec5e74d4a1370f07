// Command echoagent is the smallest agent agentmesh can delegate to: an
// HTTP server answering POST /task with what it was asked, and, on a
// routed delivery, the turn of the conversation it is in. It is for trying
// routing by hand (README, "Routing"); docs/AGENTS.md is the contract it
// follows.
//
//	go run ./examples/echoagent -addr localhost:9002 -name billing
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
)

// task is the part of the POST /task body the agent reads.
type task struct {
	Task    string `json:"task"`
	Session *struct {
		ID    string            `json:"id"`
		Turns []json.RawMessage `json:"turns"`
	} `json:"session"`
}

// handler answers POST /task as the agent called name.
func handler(name string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /task", func(w http.ResponseWriter, r *http.Request) {
		var t task
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&t); err != nil {
			http.Error(w, "the body is not a task", http.StatusBadRequest)
			return
		}
		answer := fmt.Sprintf("%s got: %s", name, t.Task)
		if t.Session != nil {
			answer += fmt.Sprintf(" (turn %d of session %s)", len(t.Session.Turns)/2+1, t.Session.ID)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"result": answer})
	})
	return mux
}

func main() {
	addr := flag.String("addr", "localhost:9001", "listen address")
	name := flag.String("name", "echo", "the agent's name, in its answers")
	flag.Parse()
	log.Printf("%s listening on http://%s/task", *name, *addr)
	log.Fatal(http.ListenAndServe(*addr, handler(*name)))
}
