package netguard_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/agentmesh/agentmesh/netguard"
)

func ExamplePolicy_CheckURL() {
	// The policy of `agentmesh serve`: private endpoints are refused, and
	// the refusal says how to allow them.
	policy, err := netguard.NewPolicy(netguard.Options{Hint: "set --allow-private-endpoints to allow"})
	if err != nil {
		panic(err)
	}
	for _, endpoint := range []string{
		"https://agents.example.com/mcp",
		"http://169.254.169.254/latest/meta-data/",
		"http://127.0.0.1:8080/task",
		"http://[::ffff:10.0.0.1]/task",
		"http://2130706433/",
		"ftp://agents.example.com/",
		"http://user:secret@agents.example.com/",
	} {
		var refused *netguard.RefusedError
		if err := policy.CheckURL(endpoint); errors.As(err, &refused) {
			fmt.Printf("refused: %s\n", refused.Rule)
			continue
		}
		fmt.Printf("allowed: %s\n", endpoint)
	}
	// Output:
	// allowed: https://agents.example.com/mcp
	// refused: link-local address (cloud metadata)
	// refused: loopback address; set --allow-private-endpoints to allow
	// refused: private address (RFC 1918), embedded in an IPv4-mapped IPv6 address; set --allow-private-endpoints to allow
	// refused: ambiguous IP literal (decimal, octal, hex or short IPv4 forms are not allowed; write a dotted-quad address)
	// refused: scheme must be http or https
	// refused: userinfo (user:password@) is not allowed in an endpoint URL
}

func ExamplePolicy_CheckURL_nilPolicy() {
	// A nil Policy is the library default: private endpoints are allowed,
	// the always-refused ones are not.
	var policy *netguard.Policy
	fmt.Println(policy.CheckURL("http://localhost:8080/task"))
	fmt.Println(policy.CheckURL("http://metadata.google.internal/"))
	// Output:
	// <nil>
	// netguard: endpoint not allowed: metadata.google.internal: cloud metadata host name
}

func ExampleNewPolicy() {
	policy, err := netguard.NewPolicy(netguard.Options{
		AllowHosts: []string{"agents.corp.example", "*.svc.corp.example", "10.1.0.0/16"},
		Hint:       "set --allow-private-endpoints to allow",
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(policy.CheckURL("http://10.1.2.3:8080/task"))
	fmt.Println(policy.CheckURL("http://10.2.0.1:8080/task"))
	// An allow-list entry never allows an always-refused endpoint.
	fmt.Println(policy.CheckURL("http://169.254.169.254/"))

	_, err = netguard.NewPolicy(netguard.Options{AllowHosts: []string{"10.1.0.0/33"}})
	fmt.Println(errors.Is(err, netguard.ErrInvalidAllowHost))
	// Output:
	// <nil>
	// netguard: endpoint not allowed: 10.2.0.1: private address (RFC 1918); set --allow-private-endpoints to allow
	// netguard: endpoint not allowed: 169.254.169.254: link-local address (cloud metadata)
	// true
}

func ExamplePolicy_NewClient() {
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from the agent")
	}))
	defer agent.Close()

	// The agent listens on 127.0.0.1, which a strict policy refuses when
	// the client connects.
	strict, _ := netguard.NewPolicy(netguard.Options{})
	_, err := strict.NewClient(nil).Get(agent.URL)
	fmt.Println("refused:", errors.Is(err, netguard.ErrNotAllowed))

	// With private endpoints allowed, the request goes through.
	permissive, _ := netguard.NewPolicy(netguard.Options{AllowPrivate: true})
	resp, err := permissive.NewClient(nil).Get(agent.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// refused: true
	// 200 hello from the agent
}

func ExampleRefusedError() {
	policy, _ := netguard.NewPolicy(netguard.Options{})
	err := policy.CheckURL("http://[fe80::1%25eth0]:8080/")

	var refused *netguard.RefusedError
	if errors.As(err, &refused) {
		fmt.Printf("host %q refused: %s\n", refused.Host, refused.Rule)
	}
	fmt.Println(errors.Is(err, netguard.ErrNotAllowed))
	// Output:
	// host "fe80::1%eth0" refused: IPv6 zone identifier not allowed
	// true
}
