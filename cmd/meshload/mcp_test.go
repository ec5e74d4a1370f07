package main

import (
	"os"
	"runtime"
	"testing"
)

func TestParseReply(t *testing.T) {
	for _, c := range []struct {
		name, line string
		id         int64
		result     string
		errCode    int
		bad        bool
	}{
		{name: "sliced success", line: `{"jsonrpc":"2.0","id":7,"result":{"content":[],"isError":false}}` + "\n", id: 7, result: `{"content":[],"isError":false}`},
		{name: "other field order", line: `{"id":8,"result":{"a":1},"jsonrpc":"2.0"}`, id: 8, result: `{"a":1}`},
		{name: "error reply", line: `{"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"bad"}}`, id: 9, errCode: -32602},
		{name: "notification", line: `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`},
		{name: "server request", line: `{"jsonrpc":"2.0","id":1,"method":"ping"}`},
		{name: "string id", line: `{"jsonrpc":"2.0","id":"x","result":{}}`},
		{name: "garbage", line: `{"jsonrpc":"2.0","id":`, bad: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			id, r, ok := parseReply([]byte(c.line))
			if ok == c.bad {
				t.Fatalf("ok = %v", ok)
			}
			if id != c.id || string(r.result) != c.result {
				t.Errorf("id %d result %s, want %d %s", id, r.result, c.id, c.result)
			}
			if (r.err != nil) != (c.errCode != 0) || r.err != nil && r.err.Code != c.errCode {
				t.Errorf("error %v, want code %d", r.err, c.errCode)
			}
		})
	}
}

func TestProcessCPU(t *testing.T) {
	d, ok := processCPU(os.Getpid())
	if runtime.GOOS != "linux" {
		if ok {
			t.Error("processCPU works only on Linux")
		}
		return
	}
	if !ok || d < 0 {
		t.Errorf("processCPU(self) = %v, %v", d, ok)
	}
	if _, ok := processCPU(-1); ok {
		t.Error("processCPU(-1) succeeded")
	}
}
