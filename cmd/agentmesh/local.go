package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentmesh/agentmesh/client"
	"github.com/agentmesh/agentmesh/httpserver"
	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/internal/localsock"
	"github.com/agentmesh/agentmesh/store/boltstore"
)

// Several agentmesh processes on one bbolt store are one mesh (the design
// is in docs/DESIGN.md, "One store, several processes"): the process that
// holds the file (bbolt's lock) serves the HTTP API to the others on a
// same-user Unix socket next to it, and the others are front-ends of it.
// When the holder exits or dies, the kernel releases its lock and closes
// its connections; the front-ends notice at once (their watch request
// ends) and one of them takes the file over. `serve` always ends up the
// holder: a stdio holder hands the file over when a serve asks.

// Paths of the local protocol on the socket, next to the HTTP API.
const (
	// holderPath streams one JSON line describing the holder, then stays
	// open for as long as the holder holds the store.
	holderPath = "/local/v1/holder"
	// handoverPath asks a stdio holder to close the store so that the
	// asking serve can open it (409 from a serve holder).
	handoverPath = "/local/v1/handover"
)

// localTokenName names the token of the calls that arrive on the socket,
// in logs, audit entries and session ownership.
const localTokenName = "local"

// lockWait is how long one attempt to take the store waits for bbolt's
// lock.
const lockWait = 100 * time.Millisecond

// holderInfo is the first line of a holder's watch stream.
type holderInfo struct {
	PID     int    `json:"pid"`
	Mode    string `json:"mode"` // stdio | serve
	Version string `json:"version"`
}

// localServer serves a mesh's HTTP API on the store's socket. Requests
// that arrive on it passed the peer-credential check (same user), so they
// are given the holder's own token.
type localServer struct {
	ln       *localsock.Listener
	hs       *http.Server
	stopOnce sync.Once
	stop     chan struct{} // closed when the holder stops: ends the watches
}

// serveLocal listens on the socket at path and serves api there. handover
// is called for a serve's handover request; nil refuses (a serve never
// hands the store over).
func serveLocal(path string, api http.Handler, secret string, info holderInfo, handover func(ctx context.Context) error, log *slog.Logger) (*localServer, error) {
	ln, err := localsock.Listen(path, &localsock.ListenOptions{Refused: func(uid int) {
		log.Warn("refused a connection to the local mesh socket from another user", "uid", uid)
	}})
	if err != nil {
		return nil, err
	}
	ls := &localServer{ln: ln, stop: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+holderPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		_ = json.NewEncoder(w).Encode(info)
		http.NewResponseController(w).Flush()
		select {
		case <-ls.stop:
		case <-r.Context().Done():
		}
	})
	mux.HandleFunc("POST "+handoverPath, func(w http.ResponseWriter, r *http.Request) {
		if handover == nil {
			httpserver.WriteError(w, http.StatusConflict, httpserver.CodeConflict,
				fmt.Sprintf("the store is held by agentmesh serve (pid %d)", info.PID))
			return
		}
		if err := handover(r.Context()); err != nil {
			httpserver.WriteError(w, http.StatusServiceUnavailable, httpserver.CodeUnavailable, "handover failed")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":"released"}`+"\n")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		r.Header.Del("X-Api-Key")
		r.Header.Set("Authorization", "Bearer "+secret)
		api.ServeHTTP(w, r)
	})
	ls.hs = &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	go func() { _ = ls.hs.Serve(ln) }()
	return ls, nil
}

// stopAccepting ends the watches (the front-ends start looking for the
// next holder), closes the socket and keeps no connection alive past its
// current request.
func (ls *localServer) stopAccepting() {
	ls.stopOnce.Do(func() {
		close(ls.stop)
		ls.hs.SetKeepAlivesEnabled(false)
		_ = ls.ln.Close()
	})
}

// close stops accepting and waits for the requests in flight until ctx is
// done.
func (ls *localServer) close(ctx context.Context) {
	ls.stopAccepting()
	if err := ls.hs.Shutdown(ctx); err != nil {
		_ = ls.hs.Close()
	}
}

// localToken is the token of the socket's calls, added to a holder's
// token set.
func localToken(secret string) httpserver.Token {
	return httpserver.Token{Name: localTokenName, Token: secret, Scopes: []httpserver.Scope{
		httpserver.ScopeRead, httpserver.ScopeRegister, httpserver.ScopeDelegate, httpserver.ScopeRoute, httpserver.ScopeAdmin}}
}

// socketHTTP returns an HTTP client whose connections go to the socket
// at path.
func socketHTTP(path string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return localsock.Dial(ctx, path)
		},
		MaxIdleConnsPerHost: 16,
		IdleConnTimeout:     time.Minute,
	}}
}

// holderWatch is a front-end's open watch request on the holder.
type holderWatch struct {
	info   holderInfo
	done   chan struct{} // closed when the holder stops or dies
	cancel context.CancelFunc
}

// watchTimeout bounds how long a holder may take to answer a watch
// request with its first line.
const watchTimeout = 2 * time.Second

// watchHolder opens the watch request on the holder at the socket. It
// stays open until the holder stops, ctx is done, or cancel is called.
func watchHolder(ctx context.Context, hc *http.Client) (*holderWatch, error) {
	wctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(watchTimeout, cancel) // a holder that does not answer is none
	fail := func(err error) (*holderWatch, error) {
		cancel()
		return nil, fmt.Errorf("holder watch: %w", err)
	}
	req, err := http.NewRequestWithContext(wctx, http.MethodGet, "http://agentmesh.local"+holderPath, nil)
	if err != nil {
		return fail(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fail(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return fail(fmt.Errorf("HTTP %d", resp.StatusCode))
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadBytes('\n')
	if !timer.Stop() && err == nil {
		err = fmt.Errorf("no answer within %v", watchTimeout)
	}
	w := &holderWatch{done: make(chan struct{}), cancel: cancel}
	if err == nil {
		err = json.Unmarshal(line, &w.info)
	}
	if err != nil {
		resp.Body.Close()
		return fail(err)
	}
	go func() {
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, br)
		close(w.done)
	}()
	return w, nil
}

// isLocked reports whether err is bbolt's lock held by another process.
func isLocked(err error) bool { return errors.Is(err, boltstore.ErrLocked) }

// callbackPortFile keeps the port of the loopback callback listener, so
// that the next holder listens where the callback URLs already handed to
// agents point.
func callbackPortFile(db string) string { return filepath.Join(localsock.Dir(db), "callback-port") }

// listenCallbacks opens the loopback listener for async callbacks: on the
// port the previous holder used when it is free, else on a new one.
func listenCallbacks(db string) (net.Listener, error) {
	if b, err := os.ReadFile(callbackPortFile(db)); err == nil {
		if port, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && port > 0 && port < 65536 {
			if ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err == nil {
				return ln, nil
			}
		}
	}
	return net.Listen("tcp", "127.0.0.1:0")
}

// callbackHandler serves only the async callback route of api: the
// other routes stay on the socket.
func callbackHandler(api http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/delegations/{id}/result", api)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpserver.WriteError(w, http.StatusNotFound, httpserver.CodeNotFound, "this listener only takes async delegation callbacks")
	})
	return mux
}

// holding is this process holding the store: the mesh, the socket and
// the callback listener.
type holding struct {
	m        *mesh
	sock     *localServer
	cb       *http.Server
	handover chan chan struct{} // a serve asks; the reply is closed once the store is closed
}

// localMesh runs a stdio process on a shared bbolt store, as the holder
// or as a front-end, and moves between the two.
type localMesh struct {
	cfg  meshConfig
	db   string
	sock string
	log  *slog.Logger
	sw   *switcher

	done chan struct{} // closed when run returns
}

// absDBPath is the absolute path of the bbolt file: every process on
// one store must find the same socket.
func absDBPath(db string) (string, error) {
	db, err := dbPath(db)
	if err != nil {
		return "", err
	}
	return filepath.Abs(db)
}

func newLocalMesh(cfg meshConfig) (*localMesh, error) {
	db, err := absDBPath(cfg.db)
	if err != nil {
		return nil, err
	}
	sock, err := localsock.Path(db)
	if err != nil {
		return nil, err
	}
	cfg.db, cfg.lockTimeout = db, lockWait
	return &localMesh{cfg: cfg, db: db, sock: sock, log: cfg.log, sw: newSwitcher(), done: make(chan struct{})}, nil
}

// tryHold takes the store if no other process holds it (the error then
// wraps boltstore.ErrLocked) and starts serving it.
func (l *localMesh) tryHold(ctx context.Context) (*holding, error) {
	cbln, err := listenCallbacks(l.db)
	if err != nil {
		return nil, fmt.Errorf("callback listener: %w", err)
	}
	cfg := l.cfg
	port := cbln.Addr().(*net.TCPAddr).Port
	if cfg.publicURL == "" {
		cfg.publicURL = "http://127.0.0.1:" + strconv.Itoa(port)
	}
	m, err := openMesh(ctx, cfg)
	if err != nil {
		cbln.Close()
		return nil, err
	}
	h := &holding{m: m, handover: make(chan chan struct{})}
	fail := func(err error) (*holding, error) {
		cbln.Close()
		if h.sock != nil {
			h.sock.close(context.Background())
		}
		m.close(context.Background())
		return nil, err
	}
	_ = os.WriteFile(callbackPortFile(l.db), []byte(strconv.Itoa(port)+"\n"), 0o600)
	secret := httpserver.GenerateToken()
	opts := &httpserver.Options{
		Tokens:         []httpserver.Token{localToken(secret)},
		PublicURL:      cfg.publicURL,
		Logger:         l.log,
		NoMetricsRoute: true,
		StorePing:      httpserver.PingStore(m.Store()),
		Ready:          m.ready,
		Breakers:       m.Breakers(),
		CardClient:     m.Policy().NewClient(nil),
	}
	if m.Router() != nil {
		opts.Router, opts.Sessions = m.Router(), m.Sessions()
	}
	api, err := httpserver.New(m.Registry(), m.searcher(), m.delegator(), opts)
	if err != nil {
		return fail(err)
	}
	info := holderInfo{PID: os.Getpid(), Mode: "stdio", Version: buildinfo.Version()}
	h.sock, err = serveLocal(l.sock, api, secret, info, func(ctx context.Context) error {
		released := make(chan struct{})
		select {
		case h.handover <- released:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case <-released:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, l.log)
	if err != nil {
		return fail(err)
	}
	h.cb = &http.Server{Handler: callbackHandler(api), ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(l.log.Handler(), slog.LevelWarn)}
	go func() { _ = h.cb.Serve(cbln) }()
	l.log.Info("holding the local mesh", "store", l.db, "socket", l.sock, "callbacks", cfg.publicURL)
	return h, nil
}

// release stops serving and closes the store: in-flight delegations get
// up to grace to finish. released, if not nil, is closed once the store
// is, before the socket's last requests (the handover's) are answered.
func (h *holding) release(grace time.Duration, released chan struct{}) {
	h.sock.stopAccepting()
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = h.cb.Shutdown(ctx)
	_ = h.m.close(ctx)
	if released != nil {
		close(released)
	}
	h.sock.close(context.Background())
}

// handoverGrace is how long a stdio holder lets its delegations finish
// before it hands the store to a serve.
const handoverGrace = 5 * time.Second

// start takes the first role: the holder, or a front-end of the holder.
// It fails when the store cannot be opened for another reason than
// another process holding it, or when no holder answers within
// switchWait. run then keeps a role until ctx is done.
func (l *localMesh) start(ctx context.Context) error {
	deadline := time.Now().Add(switchWait)
	for {
		h, fe, err := l.step(ctx, true)
		switch {
		case err == nil:
			go l.run(ctx, h, fe)
			return nil
		case !isLocked(err) && !errors.Is(err, errNoHolder):
			return err
		case time.Now().After(deadline):
			return fmt.Errorf("the store %s is locked by a process that does not serve it on %s (an older agentmesh, or another program): %w", l.db, l.sock, err)
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// errNoHolder: nobody answers on the socket.
var errNoHolder = errors.New("no holder answers on the local mesh socket")

// frontEnd is this process talking to the holder.
type frontEnd struct {
	hc    *http.Client
	watch *holderWatch
}

func (f *frontEnd) close() {
	f.watch.cancel()
	f.hc.CloseIdleConnections()
}

// step tries one role: a front-end when a holder answers, else the holder
// when hold is true and the store is free.
func (l *localMesh) step(ctx context.Context, hold bool) (*holding, *frontEnd, error) {
	hc := socketHTTP(l.sock)
	if w, err := watchHolder(ctx, hc); err == nil {
		// No retries in the client: the switcher decides what to do when
		// the holder is gone.
		c, err := client.New("http://agentmesh.local", &client.Options{HTTPClient: hc, MaxRetries: -1})
		if err != nil {
			w.cancel()
			return nil, nil, err
		}
		gcForFrontEnd()
		l.sw.set(remote{c})
		l.log.Info("joined the local mesh", "holder_pid", w.info.PID, "holder_mode", w.info.Mode,
			"holder_version", w.info.Version, "socket", l.sock)
		return nil, &frontEnd{hc: hc, watch: w}, nil
	}
	hc.CloseIdleConnections()
	if !hold {
		return nil, nil, errNoHolder
	}
	h, err := l.tryHold(ctx)
	if err != nil {
		if isLocked(err) {
			return nil, nil, fmt.Errorf("%w: %w", errNoHolder, err)
		}
		return nil, nil, err
	}
	gcForHolder()
	l.sw.set(inproc{h.m})
	return h, nil, nil
}

// run keeps the process in a role until ctx is done: it serves while it
// holds the store (until ctx ends or a serve asks for it), follows the
// holder while it is a front-end, and looks for the next holder when the
// current one goes away.
func (l *localMesh) run(ctx context.Context, h *holding, fe *frontEnd) {
	defer close(l.done)
	var noHoldUntil time.Time // after a handover, leave the store to the serve that asked
	for {
		switch {
		case h != nil:
			var released chan struct{}
			select {
			case <-ctx.Done():
			case released = <-h.handover:
				l.log.Info("handing the local mesh over to agentmesh serve")
			}
			l.sw.set(nil)
			h.release(handoverGrace, released)
			h = nil
			if ctx.Err() != nil {
				return
			}
			noHoldUntil = time.Now().Add(switchWait)
		case fe != nil:
			select {
			case <-ctx.Done():
				fe.close()
				return
			case <-fe.watch.done:
				l.log.Info("the local mesh holder went away; looking for the next one", "holder_pid", fe.watch.info.PID)
			case <-l.sw.lost:
			}
			l.sw.set(nil)
			fe.close()
			fe = nil
		}
		var err error
		h, fe, err = l.step(ctx, time.Now().After(noHoldUntil))
		if err != nil && !isLocked(err) && !errors.Is(err, errNoHolder) {
			l.log.Error("cannot take over the local mesh", "err", err)
		}
		if h == nil && fe == nil && !sleepCtx(ctx, 20*time.Millisecond) {
			return
		}
	}
}

// sleepCtx sleeps for d, or until ctx is done (then it returns false).
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// openSharedMesh opens the bbolt store for serve: when a stdio process
// holds it, serve asks it to hand the store over, and opens it once it
// is released. A serve holding it refuses (two serves on one file are a
// configuration error); a process that holds the lock without serving the
// socket is waited for up to switchWait.
func openSharedMesh(ctx context.Context, cfg meshConfig) (*mesh, error) {
	sock, err := localsock.Path(cfg.db)
	if err != nil {
		return nil, err
	}
	cfg.lockTimeout = lockWait
	deadline := time.Now().Add(switchWait)
	for {
		m, err := openMesh(ctx, cfg)
		if err == nil || !isLocked(err) {
			return m, err
		}
		if herr := askHandover(ctx, sock); errors.Is(herr, errHeldByServe) {
			return nil, herr
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the store %s stays locked by a process that does not hand it over: %w", cfg.db, err)
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return nil, ctx.Err()
		}
	}
}

// errHeldByServe: the store is held by another agentmesh serve.
var errHeldByServe = errors.New("the store is held by another agentmesh serve")

// askHandover asks the holder on the socket to release the store, and
// returns once it has (or it failed to answer).
func askHandover(ctx context.Context, sock string) error {
	hc := socketHTTP(sock)
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, handoverGrace+5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://agentmesh.local"+handoverPath, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	switch resp.StatusCode {
	case http.StatusOK:
		return nil
	case http.StatusConflict:
		var e httpserver.ErrorResponse
		_ = json.Unmarshal(body, &e)
		return fmt.Errorf("%w: %s", errHeldByServe, e.Error)
	}
	return fmt.Errorf("handover: HTTP %d", resp.StatusCode)
}
