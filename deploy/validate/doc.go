// Package validate holds the tests of the deployment recipes in deploy/:
// the Kubernetes manifests are decoded strictly into the Kubernetes API
// types (the types the API server's OpenAPI schemas are generated from),
// so a misspelled or misplaced field fails, and checked for what
// agentmesh needs (probes, non-root, read-only root, resources, the
// Secret, NetworkPolicies); the Compose files are loaded with compose-go,
// which validates them against the Compose specification's schema.
//
// It is a module of its own so that the main module does not depend on
// the Kubernetes API or compose-go. Run it from this directory:
//
//	cd deploy/validate && go test ./...
package validate
