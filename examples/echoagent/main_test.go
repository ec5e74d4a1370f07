package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEchoAgent(t *testing.T) {
	srv := httptest.NewServer(handler("billing", options{}))
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

// With -async and -save the agent accepts (202, nothing answered) and
// keeps the task, whose callbackUrl a person then posts the outcome to.
func TestEchoAgentAsync(t *testing.T) {
	saved := filepath.Join(t.TempDir(), "task.json")
	srv := httptest.NewServer(handler("reports", options{async: true, save: saved}))
	defer srv.Close()
	body := `{"delegationId": "d2", "task": "Q3 report", "callbackUrl": "http://mesh/v1/delegations/d2/result?token=s"}`
	resp, err := http.Post(srv.URL+"/task", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("async task: %d, want 202", resp.StatusCode)
	}
	data, err := os.ReadFile(saved)
	if err != nil {
		t.Fatal(err)
	}
	var got struct{ CallbackURL string }
	if err := json.Unmarshal(data, &got); err != nil || got.CallbackURL != "http://mesh/v1/delegations/d2/result?token=s" {
		t.Errorf("saved task %q: callbackUrl %q (%v)", data, got.CallbackURL, err)
	}
	// A body that is no task is refused, and not saved over the last one.
	resp, err = http.Post(srv.URL+"/task", "application/json", strings.NewReader("not json"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if again, _ := os.ReadFile(saved); resp.StatusCode != http.StatusBadRequest || string(again) != string(data) {
		t.Errorf("bad body: %d, saved %q", resp.StatusCode, again)
	}
}
