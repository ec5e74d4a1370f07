package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentmesh/agentmesh/internal/buildinfo"
	"github.com/agentmesh/agentmesh/internal/webhook"
	"github.com/agentmesh/agentmesh/metrics"
	"github.com/agentmesh/agentmesh/netguard"
	"github.com/agentmesh/agentmesh/session"
)

// webhookConfig is the session webhook of `serve`: every routing session
// that ends is posted, signed, to url.
type webhookConfig struct {
	url    string // --session-webhook, MESH_SESSION_WEBHOOK
	secret string // MESH_SESSION_WEBHOOK_SECRET only, never a flag
}

// check refuses a webhook without a usable secret: an unsigned event
// could be forged by anyone who can reach the receiver.
func (c webhookConfig) check() error {
	if c.url != "" && len(c.secret) < webhook.MinSecretLen {
		return fmt.Errorf("--session-webhook needs MESH_SESSION_WEBHOOK_SECRET, at least %d bytes (e.g. openssl rand -hex 32)", webhook.MinSecretLen)
	}
	return nil
}

// eventSessionClosed is the X-Agentmesh-Event, and the type, of a
// session close posted to the webhook.
const eventSessionClosed = "session.closed"

// sessionClosedPayload is the JSON body of a session close: the event's
// fields with its type and its duration.
type sessionClosedPayload struct {
	Type string `json:"type"`
	session.CloseEvent
	DurationMs int64 `json:"duration_ms"`
}

// startSessionEvents builds what follows session closes: the metrics
// (on reg, nil for none) and, with wh.url, the webhook sender over the
// endpoint policy's client, with its counters. Call it from Observe,
// after start and before the session manager exists.
func (o *observer) startSessionEvents(reg *prometheus.Registry, wh webhookConfig, policy *netguard.Policy, routing bool) error {
	if reg != nil {
		m, err := metrics.NewSessionCloses(reg)
		if err != nil {
			return err
		}
		o.sessionMetrics = m
	}
	if wh.url == "" {
		return nil
	}
	if err := wh.check(); err != nil {
		return err
	}
	s, err := webhook.New(wh.url, []byte(wh.secret), &webhook.Options{
		Client:    policy.NewClient(nil),
		UserAgent: "agentmesh/" + buildinfo.Version(),
		Logger:    o.log.With("webhook", "session"),
	})
	if err != nil {
		return fmt.Errorf("--session-webhook: %w", err)
	}
	if err := policy.CheckURL(wh.url); err != nil {
		_ = s.Close()
		return fmt.Errorf("--session-webhook: %w", err)
	}
	if reg != nil {
		cs := []prometheus.Collector{
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "agentmesh_session_webhook_delivered_total",
				Help: "Session close events the webhook receiver accepted.",
			}, func() float64 { return float64(s.Delivered()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "agentmesh_session_webhook_failed_total",
				Help: "Session close events the webhook gave up on: refused by the receiver (4xx) or failing every attempt.",
			}, func() float64 { return float64(s.Failed()) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name: "agentmesh_session_webhook_dropped_total",
				Help: "Session close events dropped: the webhook queue was full, or the shutdown timeout ended before they were sent.",
			}, func() float64 { return float64(s.Dropped()) }),
		}
		for _, c := range cs {
			if err := reg.Register(c); err != nil {
				_ = s.Close()
				return err
			}
		}
	}
	o.webhook = s
	host := ""
	if u, err := url.Parse(wh.url); err == nil {
		host = u.Host
	}
	if !routing {
		o.log.Warn("--session-webhook is set but routing is off: no session will end to post")
	}
	o.log.Info("session webhook on", "host", host) // not the URL: it may hold a token
	return nil
}

// sessionClosed is session.Options.OnClose: a session that ended is
// counted, audited with the caller that ended it, and queued for the
// webhook (never waiting on it).
func (o *observer) sessionClosed(ctx context.Context, e session.CloseEvent) {
	if o.sessionMetrics != nil {
		o.sessionMetrics.Observe(ctx, e)
	}
	o.audit.SessionClosed(ctx, e)
	if o.webhook == nil {
		return
	}
	body, err := json.Marshal(sessionClosedPayload{Type: eventSessionClosed, CloseEvent: e, DurationMs: e.Duration().Milliseconds()})
	if err != nil {
		o.log.Warn("session webhook: encoding an event failed", "session_id", e.SessionID, "err", err)
		return
	}
	o.webhook.Send(eventSessionClosed, body)
}

// drainWebhook delivers the queued session events until ctx is done,
// dropping the rest then. Call it once no session can end any more (the
// mesh is shut down).
func (o *observer) drainWebhook(ctx context.Context) {
	if o.webhook == nil {
		return
	}
	start := time.Now()
	if err := o.webhook.Shutdown(ctx); err != nil {
		o.log.Warn("session webhook: the shutdown timeout ended before every event was delivered", "waited", time.Since(start).String(), "dropped_total", o.webhook.Dropped())
	}
}
