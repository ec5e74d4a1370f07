package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestEchoAgent(t *testing.T) {
	srv := httptest.NewServer(handler("billing"))
	defer srv.Close()
	post := func(body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/task", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	code, out := post(`{"delegationId": "d1", "task": "refund please", "context": {"depth": 1, "chain": []}}`)
	if code != http.StatusOK || out["result"] != "billing got: refund please" {
		t.Errorf("plain task: %d %v", code, out)
	}
	code, out = post(`{"task": "it was on the 3rd", "session": {"id": "s1", "turns": [{"role": "user"}, {"role": "agent"}]}}`)
	if code != http.StatusOK || out["result"] != "billing got: it was on the 3rd (turn 2 of session s1)" {
		t.Errorf("routed task: %d %v", code, out)
	}
	if code, _ := post(`not json`); code != http.StatusBadRequest {
		t.Errorf("bad body: %d, want 400", code)
	}
}
