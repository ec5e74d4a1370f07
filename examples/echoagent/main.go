// Command echoagent is the smallest agent agentmesh can delegate to: an
// HTTP server answering POST /task with what it was asked, and, on a
// routed delivery, the turn of the conversation it is in. It is for trying
// routing and delegation by hand (README, "Routing"; docs/API.md);
// docs/AGENTS.md is the contract it follows.
//
//	go run ./examples/echoagent -addr localhost:9002 -name billing
//
// With -async it answers 202 instead, as an agent that reports later
// does, and leaves the report to you: -save writes each task it receives
// to a file, where its callbackUrl is (docs/API.md, "Delegations").
//
//	go run ./examples/echoagent -addr localhost:9003 -name reports -async -save /tmp/reports-task.json
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
)

// task is the part of the POST /task body the agent reads.
type task struct {
	Task    string `json:"task"`
	Session *struct {
		ID    string            `json:"id"`
		Turns []json.RawMessage `json:"turns"`
	} `json:"session"`
}

// options are the agent's flags beyond its name.
type options struct {
	async bool   // answer 202, the outcome to be posted to the callbackUrl
	save  string // write each task's body to this file ("": none)
}

// handler answers POST /task as the agent called name.
func handler(name string, o options) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /task", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		var t task
		if err == nil {
			err = json.Unmarshal(body, &t)
		}
		if err != nil {
			http.Error(w, "the body is not a task", http.StatusBadRequest)
			return
		}
		if o.save != "" {
			if err := os.WriteFile(o.save, append(bytes.TrimSpace(body), '\n'), 0o600); err != nil {
				log.Printf("save the task: %v", err)
				http.Error(w, "cannot save the task", http.StatusInternalServerError)
				return
			}
		}
		if o.async {
			w.WriteHeader(http.StatusAccepted)
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
	var o options
	flag.BoolVar(&o.async, "async", false, "answer 202 (accepted) and leave the outcome to be posted to the task's callbackUrl by hand")
	flag.StringVar(&o.save, "save", "", "write the body of each task received to this `file` (the last one wins)")
	flag.Parse()
	log.Printf("%s listening on http://%s/task", *name, *addr)
	log.Fatal(http.ListenAndServe(*addr, handler(*name, o)))
}
