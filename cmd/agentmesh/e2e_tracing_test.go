package main

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver (POST /v1/traces with a
// protobuf ExportTraceServiceRequest) that keeps every span it gets.
type otlpReceiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	spans    []*tracepb.Span
	services []string // service.name of each resource
	versions []string // service.version of each resource
	bad      []string // what was wrong with requests that were refused
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	o := &otlpReceiver{}
	o.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		switch {
		case r.Method != http.MethodPost || r.URL.Path != "/v1/traces":
			o.refuse(w, r.Method+" "+r.URL.Path)
			return
		case r.Header.Get("Content-Type") != "application/x-protobuf":
			o.refuse(w, "Content-Type "+r.Header.Get("Content-Type"))
			return
		case proto.Unmarshal(body, &req) != nil:
			o.refuse(w, "body is not an ExportTraceServiceRequest")
			return
		}
		o.mu.Lock()
		for _, rs := range req.GetResourceSpans() {
			attrs := rs.GetResource().GetAttributes()
			o.services = append(o.services, attrString(attrs, "service.name"))
			o.versions = append(o.versions, attrString(attrs, "service.version"))
			for _, ss := range rs.GetScopeSpans() {
				o.spans = append(o.spans, ss.GetSpans()...)
			}
		}
		o.mu.Unlock()
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(o.srv.Close)
	return o
}

func (o *otlpReceiver) refuse(w http.ResponseWriter, why string) {
	o.mu.Lock()
	o.bad = append(o.bad, why)
	o.mu.Unlock()
	http.Error(w, why, http.StatusBadRequest)
}

// received returns the spans received so far, by name (the last of each
// name), and the service names and versions of their resources.
func (o *otlpReceiver) received() (map[string]*tracepb.Span, []string, []string, []string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	m := make(map[string]*tracepb.Span)
	for _, s := range o.spans {
		m[s.GetName()] = s
	}
	return m, append([]string(nil), o.services...), append([]string(nil), o.versions...), append([]string(nil), o.bad...)
}

func attrString(attrs []*commonpb.KeyValue, key string) string {
	for _, kv := range attrs {
		if kv.GetKey() == key {
			return kv.GetValue().GetStringValue()
		}
	}
	return ""
}

// TestE2ETracing runs `agentmesh serve` with OTEL_EXPORTER_OTLP_ENDPOINT
// pointing at an OTLP/HTTP receiver (docs/OPERATIONS.md#tracing): a delegation sent with a
// traceparent reaches the agent with a traceparent of the same trace, and
// the server, delegation and agent-call spans of that trace arrive at the
// receiver as OTLP protobuf, from service agentmesh. The batch delay is
// set far beyond the test, so the spans can only arrive through the flush
// of a graceful shutdown.
func TestE2ETracing(t *testing.T) {
	t.Parallel()
	otlp := newOTLPReceiver(t)
	var (
		mu          sync.Mutex
		traceparent []string
	)
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		traceparent = append(traceparent, r.Header.Get("Traceparent"))
		mu.Unlock()
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"result":"42k EUR"}`)
	}))
	t.Cleanup(agent.Close)

	p := startServe(t, serveSpec{
		token: "trace-token",
		args:  []string{"--allow-private-endpoints"},
		env: []string{
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + otlp.srv.URL,
			"OTEL_BSP_SCHEDULE_DELAY=600000", // ms: only the shutdown flush exports
		},
	})
	p.stderr.wait(t, 5*time.Second, "tracing on", func(l string) bool { return strings.Contains(l, "tracing on") })
	api := p.client()
	r := api.do("POST", "/v1/agents", agentJSON("budget-agent", agent.URL+"/task", "budget"))
	require.Equal(t, http.StatusCreated, r.status, "%s", r)

	const (
		callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
		callerSpan  = "00f067aa0ba902b7"
	)
	task := "Budget of Engineering for jane.doe@example.com?"
	r = api.do("POST", "/v1/delegate", map[string]any{"targetName": "budget-agent", "task": task},
		"Traceparent: 00-"+callerTrace+"-"+callerSpan+"-01")
	require.Equal(t, http.StatusOK, r.status, "%s", r)
	require.Equal(t, "completed", r.obj(t)["status"], "%s", r)

	mu.Lock()
	got := append([]string(nil), traceparent...)
	mu.Unlock()
	require.Len(t, got, 1)
	parts := strings.Split(got[0], "-")
	require.Len(t, parts, 4, "traceparent %q", got[0])
	assert.Equal(t, callerTrace, parts[1], "the agent joins the caller's trace")
	assert.NotEqual(t, callerSpan, parts[2], "under a span of the mesh")

	spans, _, _, _ := otlp.received()
	assert.Empty(t, spans, "nothing exported before the batch delay or the shutdown")
	p.stop()

	spans, services, versions, bad := otlp.received()
	require.Empty(t, bad, "requests the receiver refused")
	require.NotEmpty(t, services)
	for i := range services {
		assert.Equal(t, "agentmesh", services[i])
		assert.NotEmpty(t, versions[i])
	}
	server, del, attempt := spans["POST /v1/delegate"], spans["delegation.delegate"], spans["delegation.attempt"]
	require.NotNil(t, server, "server span; got %v", names(spans))
	require.NotNil(t, del, "delegation span; got %v", names(spans))
	require.NotNil(t, attempt, "agent call span; got %v", names(spans))
	for _, s := range []*tracepb.Span{server, del, attempt} {
		assert.Equal(t, callerTrace, hex.EncodeToString(s.GetTraceId()), s.GetName())
	}
	assert.Equal(t, callerSpan, hex.EncodeToString(server.GetParentSpanId()))
	assert.Equal(t, server.GetSpanId(), del.GetParentSpanId())
	assert.Equal(t, del.GetSpanId(), attempt.GetParentSpanId())
	assert.Equal(t, parts[2], hex.EncodeToString(attempt.GetSpanId()), "the agent's parent is the agent call span")
	assert.Equal(t, tracepb.Span_SPAN_KIND_SERVER, server.GetKind())
	assert.Equal(t, tracepb.Span_SPAN_KIND_CLIENT, attempt.GetKind())
	assert.Equal(t, "budget-agent", attrString(attempt.GetAttributes(), "agentmesh.agent.name"))
	assert.Equal(t, "http", attrString(attempt.GetAttributes(), "agentmesh.agent.protocol"))
	assert.Equal(t, "/v1/delegate", attrString(server.GetAttributes(), "http.route"))
	for _, s := range spans {
		for _, kv := range s.GetAttributes() {
			v := kv.GetValue().String()
			assert.NotContains(t, v, "jane.doe", "%s: %s", s.GetName(), kv.GetKey())
			assert.NotContains(t, v, "trace-token", "%s: %s", s.GetName(), kv.GetKey())
		}
	}
}

func names(spans map[string]*tracepb.Span) []string {
	var out []string
	for n := range spans {
		out = append(out, n)
	}
	return out
}
