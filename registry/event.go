package registry

// EventType says what happened to an agent.
type EventType int

// Event types.
const (
	// EventPut: the agent was created or replaced.
	EventPut EventType = iota + 1
	// EventHeartbeat: only the agent's LastSeen changed.
	EventHeartbeat
	// EventDelete: the agent was unregistered or removed after its TTL
	// grace period (Expired is then true).
	EventDelete
)

func (t EventType) String() string {
	switch t {
	case EventPut:
		return "put"
	case EventHeartbeat:
		return "heartbeat"
	case EventDelete:
		return "delete"
	}
	return "unknown"
}

// Event is a change to the registry, delivered to subscribers after it is
// committed to the store.
type Event struct {
	Type EventType
	// Agent is the record after the change (token included: subscribers are
	// trusted in-process code). For EventDelete it is the removed record.
	// Every subscriber gets the same record, which the registry never
	// modifies: keep it as it is, and Clone it to change it.
	Agent Agent
	// Created is true for an EventPut that created the agent.
	Created bool
	// Expired is true for an EventDelete caused by TTL expiry.
	Expired bool
}
