package validate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// newObject returns an empty object of the Kubernetes API type for
// apiVersion and kind; the manifests may use only these.
func newObject(apiVersion, kind string) (any, error) {
	switch apiVersion + " " + kind {
	case "v1 Secret":
		return &corev1.Secret{}, nil
	case "v1 Service":
		return &corev1.Service{}, nil
	case "v1 PersistentVolumeClaim":
		return &corev1.PersistentVolumeClaim{}, nil
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, nil
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, nil
	case "apps/v1 StatefulSet":
		return &appsv1.StatefulSet{}, nil
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, nil
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, nil
	}
	return nil, fmt.Errorf("apiVersion %q kind %q: not a type these manifests use", apiVersion, kind)
}

// decodeManifests splits a multi-document YAML file and decodes each
// document strictly into its API type: an unknown or duplicate field is
// an error naming the document.
func decodeManifests(data []byte) ([]any, error) {
	var objs []any
	for i, doc := range splitDocuments(data) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		obj, err := newObject(tm.APIVersion, tm.Kind)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i+1, err)
		}
		if err := yaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i+1, tm.Kind, err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// splitDocuments returns the non-empty documents of a YAML stream.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	for _, doc := range bytes.Split(append([]byte("\n"), data...), []byte("\n---")) {
		empty := true
		for _, line := range strings.Split(string(doc), "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				empty = false
				break
			}
		}
		if !empty {
			docs = append(docs, doc)
		}
	}
	return docs
}

func readManifest(t *testing.T, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "kubernetes", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestKubernetesManifests decodes every manifest strictly and checks what
// agentmesh needs of them.
func TestKubernetesManifests(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in deploy/kubernetes: %v", err)
	}
	for _, file := range files {
		name := filepath.Base(file)
		t.Run(name, func(t *testing.T) {
			objs, err := decodeManifests(readManifest(t, name))
			if err != nil {
				t.Fatal(err)
			}
			checkManifests(t, objs)
		})
	}
}

// TestKubernetesManifestsStrict: the checks can fail. A misspelled field,
// a field at the wrong level, a duplicate key and an unknown kind are
// each refused; a deployment without a readiness probe or running as root
// fails the agentmesh checks.
func TestKubernetesManifestsStrict(t *testing.T) {
	good := string(readManifest(t, "single.yaml"))
	for _, tc := range []struct{ name, old, new, want string }{
		{"misspelled field", "readinessProbe:", "readinesProbe:", `unknown field "readinesProbe"`},
		{"field at the wrong level", "      automountServiceAccountToken: false\n", "      automountServiceAccountToken: false\n      replicas: 2\n", `unknown field "replicas"`},
		{"duplicate key", "  replicas: 1\n", "  replicas: 1\n  replicas: 2\n", `"replicas" already set`},
		{"wrong type", "  replicas: 1\n", "  replicas: one\n", "cannot unmarshal"},
		{"unknown kind", "kind: PersistentVolumeClaim", "kind: PersistentVolumeClame", "not a type these manifests use"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(good, tc.old, tc.new, 1)
			if bad == good {
				t.Fatalf("the mutation %q did not apply", tc.old)
			}
			_, err := decodeManifests([]byte(bad))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("decode: got %v, want an error containing %q", err, tc.want)
			}
		})
	}

	for _, tc := range []struct{ name, old, new, want string }{
		{"no readiness probe", "              path: /health/ready", "              path: /health", "readiness probe"},
		{"root", "        runAsUser: 65532\n", "        runAsUser: 0\n", "runAsUser"},
		{"writable root", "readOnlyRootFilesystem: true", "readOnlyRootFilesystem: false", "readOnlyRootFilesystem"},
		{"missing secret", "                  name: agentmesh\n                  key: MESH_TOKEN", "                  name: agentmesh-tokens\n                  key: MESH_TOKEN", "Secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := strings.Replace(good, tc.old, tc.new, 1)
			if bad == good {
				t.Fatalf("the mutation %q did not apply", tc.old)
			}
			objs, err := decodeManifests([]byte(bad))
			if err != nil {
				t.Fatal(err)
			}
			rec := &recorder{}
			checkManifests(rec, objs)
			if !strings.Contains(strings.Join(rec.errs, "\n"), tc.want) {
				t.Fatalf("checks: got %q, want an error about %s", rec.errs, tc.want)
			}
		})
	}
}

// errorer is the part of testing.T the checks use, so a test can run them
// on a broken manifest and read their errors.
type errorer interface {
	Helper()
	Errorf(format string, args ...any)
}

type recorder struct{ errs []string }

func (r *recorder) Helper() {}
func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// checkManifests checks a file's objects for what agentmesh needs: the
// agentmesh workload probes /health and /health/ready, every pod runs as
// a non-root user with a read-only root file system, no privilege
// escalation and resource requests; the Secrets, claims and volumes it
// names exist; selectors select their templates; a Service targets a
// named container port; a NetworkPolicy selects the mesh.
func checkManifests(t errorer, objs []any) {
	t.Helper()
	secrets, claims := map[string]bool{}, map[string]bool{}
	var pods []podOf
	var services []*corev1.Service
	var policies []*networkingv1.NetworkPolicy
	for _, obj := range objs {
		switch o := obj.(type) {
		case *corev1.Secret:
			secrets[o.Name] = true
		case *corev1.PersistentVolumeClaim:
			claims[o.Name] = true
		case *corev1.Service:
			services = append(services, o)
		case *networkingv1.NetworkPolicy:
			policies = append(policies, o)
		case *appsv1.Deployment:
			pods = append(pods, podOf{"Deployment " + o.Name, o.Spec.Selector, &o.Spec.Template})
		case *appsv1.StatefulSet:
			pods = append(pods, podOf{"StatefulSet " + o.Name, o.Spec.Selector, &o.Spec.Template})
			for _, c := range o.Spec.VolumeClaimTemplates {
				claims[c.Name] = true
			}
		}
	}
	mesh := false
	for _, p := range pods {
		checkPod(t, p, secrets, claims)
		if p.template.Labels["app.kubernetes.io/name"] == "agentmesh" {
			mesh = true
			checkMeshProbes(t, p)
		}
	}
	if !mesh {
		t.Errorf("no workload labelled app.kubernetes.io/name=agentmesh")
	}
	for _, s := range services {
		checkService(t, s, pods)
	}
	covered := false
	for _, np := range policies {
		if np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] == "agentmesh" {
			covered = true
		}
	}
	if !covered {
		t.Errorf("no NetworkPolicy selects the agentmesh pods")
	}
}

type podOf struct {
	name     string
	selector *metav1.LabelSelector
	template *corev1.PodTemplateSpec
}

func checkPod(t errorer, p podOf, secrets, claims map[string]bool) {
	t.Helper()
	spec := p.template.Spec
	if p.selector == nil || len(p.selector.MatchLabels) == 0 {
		t.Errorf("%s: no selector", p.name)
	} else {
		for k, v := range p.selector.MatchLabels {
			if p.template.Labels[k] != v {
				t.Errorf("%s: the selector %s=%s does not select the pod template", p.name, k, v)
			}
		}
	}
	psc := spec.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot {
		t.Errorf("%s: the pod does not set runAsNonRoot", p.name)
	}
	if psc == nil || psc.RunAsUser == nil || *psc.RunAsUser == 0 {
		t.Errorf("%s: runAsUser must be a numeric non-root user", p.name)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: the service account token is mounted (the mesh needs no API access)", p.name)
	}
	volumes := map[string]bool{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
		if v.PersistentVolumeClaim != nil && !claims[v.PersistentVolumeClaim.ClaimName] {
			t.Errorf("%s: volume %s names the PersistentVolumeClaim %q, which the file does not define", p.name, v.Name, v.PersistentVolumeClaim.ClaimName)
		}
	}
	for c := range claims {
		volumes[c] = true // a StatefulSet's claim templates
	}
	for _, c := range spec.Containers {
		where := p.name + " container " + c.Name
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: readOnlyRootFilesystem is not true", where)
		}
		if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: allowPrivilegeEscalation is not false", where)
		}
		if sc == nil || sc.Capabilities == nil || len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" {
			t.Errorf("%s: capabilities are not dropped (drop: [ALL])", where)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			t.Errorf("%s: no cpu and memory requests", where)
		}
		if c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: no memory limit", where)
		}
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("%s: no liveness and readiness probes", where)
		}
		for _, e := range c.Env {
			if r := e.ValueFrom; r != nil && r.SecretKeyRef != nil && !secrets[r.SecretKeyRef.Name] {
				t.Errorf("%s: env %s reads the Secret %q, which the file does not define", where, e.Name, r.SecretKeyRef.Name)
			}
		}
		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				t.Errorf("%s: mounts the volume %q, which the pod does not define", where, m.Name)
			}
		}
	}
}

// checkMeshProbes: liveness on /health, readiness on /health/ready, both
// on the container's port 8766.
func checkMeshProbes(t errorer, p podOf) {
	t.Helper()
	for _, c := range p.template.Spec.Containers {
		port := ""
		for _, cp := range c.Ports {
			if cp.ContainerPort == 8766 {
				port = cp.Name
			}
		}
		if port == "" {
			t.Errorf("%s container %s: no container port 8766", p.name, c.Name)
		}
		for _, probe := range []struct {
			what, path string
			p          *corev1.Probe
		}{{"liveness probe", "/health", c.LivenessProbe}, {"readiness probe", "/health/ready", c.ReadinessProbe}} {
			if probe.p == nil || probe.p.HTTPGet == nil || probe.p.HTTPGet.Path != probe.path {
				t.Errorf("%s container %s: the %s is not GET %s", p.name, c.Name, probe.what, probe.path)
				continue
			}
			if got := probe.p.HTTPGet.Port.String(); got != port && got != "8766" {
				t.Errorf("%s container %s: the %s probes port %s, not the API port", p.name, c.Name, probe.what, got)
			}
		}
	}
}

// checkService: the Service selects a pod template and its named target
// ports are ports of that template's containers.
func checkService(t errorer, s *corev1.Service, pods []podOf) {
	t.Helper()
	for _, p := range pods {
		match := len(s.Spec.Selector) > 0
		for k, v := range s.Spec.Selector {
			match = match && p.template.Labels[k] == v
		}
		if !match {
			continue
		}
		named := map[string]bool{}
		for _, c := range p.template.Spec.Containers {
			for _, cp := range c.Ports {
				named[cp.Name] = true
			}
		}
		for _, sp := range s.Spec.Ports {
			if tp := sp.TargetPort; tp.StrVal != "" && !named[tp.StrVal] {
				t.Errorf("Service %s: port %s targets %q, which %s does not name", s.Name, sp.Name, tp.StrVal, p.name)
			}
		}
		return
	}
	t.Errorf("Service %s selects no workload of the file", s.Name)
}
