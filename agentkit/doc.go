// Package agentkit is for writing an agent that agentmesh delegates to,
// in Go: an agent of the http protocol (docs/AGENTS.md, "The http
// protocol") from one function.
//
// [New] turns a [Handler] — a function from a [Task] to a [Reply] — into
// an [Agent], an [http.Handler] that answers the mesh's POST of a task:
// in the reply (200), or, with Options.Async, by accepting the task (202)
// and posting the outcome to the task's callback URL, retrying while the
// mesh is unreachable. With Options.Token it refuses every request that
// does not carry the mesh's bearer token, and registers that token as
// the agent's auth. [Agent.Register] registers the agent through a
// [client.Client] and heartbeats on its TTL; [Agent.Run] does it all
// for a process: listener, registration, heartbeats, and a clean shutdown
// that unregisters the agent and waits for the tasks in flight.
//
//	func main() {
//		mesh, err := client.New(os.Getenv("MESH_URL"), &client.Options{Token: os.Getenv("MESH_TOKEN")})
//		if err != nil { log.Fatal(err) }
//		agent, err := agentkit.New(func(ctx context.Context, t agentkit.Task) (agentkit.Reply, error) {
//			return agentkit.Reply{Result: strings.ToUpper(t.Task)}, nil
//		}, &agentkit.Options{Token: os.Getenv("AGENT_TOKEN")})
//		if err != nil { log.Fatal(err) }
//		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
//		defer stop()
//		err = agent.Run(ctx, "localhost:9201", mesh, registry.Agent{Name: "shout",
//			Description: "Shouts the task back.", Capabilities: []string{"shout"}, TTLSeconds: 30})
//		if err != nil { log.Fatal(err) }
//	}
//
// examples/agents-go is that program, with its settings from the
// environment; the package Example runs the same against a mesh it
// starts.
//
// # Conversations
//
// A routed message carries the conversation ([Task].Session, User,
// Locale, …). The Reply's WorkflowComplete ends it, and its
// WorkflowState comes back as Session.WorkflowState on the next turn.
//
// # Errors
//
// A Handler's error fails the delegation with code agent_error and the
// error's text (at most 1 KiB): a sync agent answers 500 with it, an
// async one calls back with status "failed". A panic is recovered and
// fails the delegation the same way.
//
// # Concurrency and shutdown
//
// An Agent runs one Handler call per task, concurrently, and is safe for
// concurrent use; so is a [Registration]. [Agent.Shutdown] stops taking
// tasks (503, which the mesh retries) and waits for the async tasks in
// flight; [Registration.Close] stops the heartbeats and unregisters.
// Run calls both, and shuts its HTTP server down, when its ctx ends.
package agentkit
