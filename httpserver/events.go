package httpserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of [EventsOptions].
const (
	DefaultEventsHistory     = 256
	DefaultEventsClientQueue = 64
	DefaultEventsHeartbeat   = 15 * time.Second
	DefaultEventsMaxClients  = 256
	DefaultEventsWriteWait   = 10 * time.Second
)

// EventsOptions configures [NewEvents]. The zero value of every field
// means its default.
type EventsOptions struct {
	// History is how many recent events are kept for clients resuming
	// with Last-Event-ID. Zero or less means DefaultEventsHistory.
	History int

	// ClientQueue is how many events may wait for one client. A client
	// whose queue is full is a slow client: its stream is ended (it may
	// reconnect and resume from History), so no client grows the
	// server's memory. Zero or less means DefaultEventsClientQueue.
	ClientQueue int

	// Heartbeat is the interval of the comment line sent on an idle
	// stream, so proxies and the client see it alive. Zero or less means
	// DefaultEventsHeartbeat.
	Heartbeat time.Duration

	// MaxClients caps the streams open at once; one more gets 503
	// unavailable with Retry-After. Zero or less means
	// DefaultEventsMaxClients.
	MaxClients int

	// WriteWait is how long one write to a client may take: a client
	// that reads nothing for that long is disconnected, so it holds no
	// goroutine either. Zero or less means DefaultEventsWriteWait.
	WriteWait time.Duration
}

// Events is the feed of GET /v1/events: the mesh's changes as
// Server-Sent Events (text/event-stream), for the dashboard. The host
// publishes events ([Events.Publish]) from the library's hooks; each
// stream gets every event published while it is open, each with an id:
// line, and a client that reconnects with Last-Event-ID gets the events
// it missed first, while they are in the history. When they are not (too
// many were published meanwhile, or the server restarted), the stream
// starts with a "reset" event: the client should reload what it shows.
//
// An Events is safe for concurrent use. Use [NewEvents]; the zero value
// is not usable.
type Events struct {
	queue     int
	heartbeat time.Duration
	max       int
	writeWait time.Duration

	mu      sync.Mutex
	seq     uint64
	ring    []event // the last len(ring) events, oldest first once full
	next    int     // where the next event goes in ring, once full
	clients map[*eventClient]struct{}
	closed  bool
	gen     string // this feed's generation: ids of another one are unknown
}

// event is one published event, encoded once.
type event struct {
	id        uint64
	typ       string
	data      []byte
	principal string
}

// eventClient is one open stream.
type eventClient struct {
	id   Identity
	ch   chan *event
	done chan struct{} // closed when the feed drops the client
}

// NewEvents returns an empty feed configured by opts (nil means the
// defaults).
func NewEvents(opts *EventsOptions) *Events {
	var o EventsOptions
	if opts != nil {
		o = *opts
	}
	if o.History <= 0 {
		o.History = DefaultEventsHistory
	}
	if o.ClientQueue <= 0 {
		o.ClientQueue = DefaultEventsClientQueue
	}
	if o.Heartbeat <= 0 {
		o.Heartbeat = DefaultEventsHeartbeat
	}
	if o.MaxClients <= 0 {
		o.MaxClients = DefaultEventsMaxClients
	}
	if o.WriteWait <= 0 {
		o.WriteWait = DefaultEventsWriteWait
	}
	return &Events{
		queue:     o.ClientQueue,
		heartbeat: o.Heartbeat,
		max:       o.MaxClients,
		writeWait: o.WriteWait,
		ring:      make([]event, 0, o.History),
		clients:   make(map[*eventClient]struct{}),
		gen:       strconv.FormatInt(time.Now().UnixNano(), 36),
	}
}

// Publish sends an event of type typ (a word such as "agent.registered")
// with data encoded as JSON to every open stream. A non-empty principal
// limits the event to that principal's tokens and to admins, as the
// records it describes are (a delegation). Publish never blocks: a
// client whose queue is full is dropped. It does nothing once the feed
// is closed.
func (e *Events) Publish(typ string, data any, principal string) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("httpserver: event %s: %w", typ, err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.seq++
	ev := event{id: e.seq, typ: typ, data: b, principal: principal}
	var kept *event
	if len(e.ring) < cap(e.ring) {
		e.ring = append(e.ring, ev)
		kept = &e.ring[len(e.ring)-1]
	} else {
		e.ring[e.next] = ev
		kept = &e.ring[e.next]
		e.next = (e.next + 1) % len(e.ring)
	}
	// Clients get a copy: the ring's slot is reused later.
	sent := *kept
	for c := range e.clients {
		if !sent.visibleTo(c.id) {
			continue
		}
		select {
		case c.ch <- &sent:
		default:
			e.dropLocked(c)
		}
	}
	return nil
}

// Close ends every stream and refuses new ones (503): call it when the
// server shuts down (http.Server.RegisterOnShutdown), since open streams
// would otherwise hold the shutdown until its deadline. Close is
// idempotent.
func (e *Events) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
	for c := range e.clients {
		e.dropLocked(c)
	}
}

// Clients returns the number of open streams.
func (e *Events) Clients() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.clients)
}

func (e *Events) dropLocked(c *eventClient) {
	delete(e.clients, c)
	close(c.done)
}

func (ev *event) visibleTo(id Identity) bool {
	return ev.principal == "" || id.Principal == ev.principal || id.Has(ScopeAdmin)
}

// subscribe registers a client and returns the events after lastID it
// should get first, or reset when they are not all known.
func (e *Events) subscribe(id Identity, lastID string) (c *eventClient, backlog []event, reset *event, err *apiError) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil, nil, nil, errorf(http.StatusServiceUnavailable, CodeUnavailable, "the event feed is closed (the server is shutting down)")
	}
	if len(e.clients) >= e.max {
		return nil, nil, nil, errorf(http.StatusServiceUnavailable, CodeUnavailable, "too many event streams are open (%d)", e.max)
	}
	c = &eventClient{id: id, ch: make(chan *event, e.queue), done: make(chan struct{})}
	e.clients[c] = struct{}{}
	if lastID == "" {
		return c, nil, nil, nil
	}
	// The reset event carries the id of the last event published, so a
	// client resuming after it misses nothing.
	resetEv := &event{id: e.seq, typ: "reset", data: []byte("{}")}
	gen, n, ok := strings.Cut(lastID, "-")
	after, perr := strconv.ParseUint(n, 10, 64)
	if !ok || perr != nil || gen != e.gen || after > e.seq {
		return c, nil, resetEv, nil
	}
	if oldest := e.seq - uint64(len(e.ring)); after < oldest { // oldest: the id before the oldest kept
		return c, nil, resetEv, nil // what is kept is part of the reload
	}
	for i := range e.ring {
		ev := e.ring[(e.next+i)%len(e.ring)]
		if ev.id > after && ev.visibleTo(id) {
			backlog = append(backlog, ev)
		}
	}
	return c, backlog, reset, nil
}

func (e *Events) unsubscribe(c *eventClient) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.clients[c]; ok {
		e.dropLocked(c)
	}
}

// serveEvents is GET /v1/events.
func (s *Server) serveEvents(w *recorder, r *http.Request) {
	e := s.events
	c, backlog, reset, apiErr := e.subscribe(w.identity, r.Header.Get("Last-Event-ID"))
	if apiErr != nil {
		w.Header().Set("Retry-After", "5")
		s.fail(w, apiErr)
		return
	}
	defer e.unsubscribe(c)
	rc := http.NewResponseController(w.ResponseWriter)
	// The stream outlives the server's ReadTimeout, whose expiry would
	// cancel the request's context: the request (a GET) is read.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)

	var buf []byte
	deadline := func() { _ = rc.SetWriteDeadline(time.Now().Add(e.writeWait)) }
	write := func(ev *event) bool {
		buf = buf[:0]
		buf = append(buf, "id: "...)
		buf = append(buf, e.gen...)
		buf = append(buf, '-')
		buf = strconv.AppendUint(buf, ev.id, 10)
		buf = append(buf, "\nevent: "...)
		buf = append(buf, ev.typ...)
		buf = append(buf, "\ndata: "...)
		buf = append(buf, ev.data...) // JSON: one line
		buf = append(buf, "\n\n"...)
		_, err := w.Write(buf)
		return err == nil
	}
	// The retry: field tells EventSource-like clients how long to wait
	// before reconnecting.
	deadline()
	if _, err := w.Write([]byte("retry: 2000\n\n")); err != nil {
		return
	}
	if reset != nil && !write(reset) {
		return
	}
	for i := range backlog {
		if !write(&backlog[i]) {
			return
		}
	}
	if rc.Flush() != nil {
		return
	}
	tick := time.NewTicker(e.heartbeat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-c.done:
			return
		case ev := <-c.ch:
			deadline()
			if !write(ev) {
				return
			}
			for more := true; more; { // what is queued, in one flush
				select {
				case ev := <-c.ch:
					if !write(ev) {
						return
					}
				default:
					more = false
				}
			}
		case <-tick.C:
			deadline()
			if _, err := w.Write([]byte(": heartbeat\n\n")); err != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}
