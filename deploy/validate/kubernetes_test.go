package validate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	ktypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

const k8sDir = "deploy/kubernetes"

// manifest is one object of one file.
type manifest struct {
	file string // slash path from the repository root
	doc  int    // index of the YAML document in the file
	kind string
	obj  any // *corev1.ConfigMap, *appsv1.Deployment, ...
	meta *metav1.ObjectMeta
}

func (m manifest) String() string {
	return fmt.Sprintf("%s#%d %s/%s", m.file, m.doc, m.kind, m.meta.Name)
}

// typedKinds make an empty typed object for each allowed API version and
// kind: v1, apps/v1, autoscaling/v2 HorizontalPodAutoscaler and policy/v1
// PodDisruptionBudget only.
var typedKinds = map[string]func() (any, *metav1.ObjectMeta){
	"v1 ConfigMap":             func() (any, *metav1.ObjectMeta) { o := &corev1.ConfigMap{}; return o, &o.ObjectMeta },
	"v1 Secret":                func() (any, *metav1.ObjectMeta) { o := &corev1.Secret{}; return o, &o.ObjectMeta },
	"v1 Service":               func() (any, *metav1.ObjectMeta) { o := &corev1.Service{}; return o, &o.ObjectMeta },
	"v1 PersistentVolumeClaim": func() (any, *metav1.ObjectMeta) { o := &corev1.PersistentVolumeClaim{}; return o, &o.ObjectMeta },
	"apps/v1 Deployment":       func() (any, *metav1.ObjectMeta) { o := &appsv1.Deployment{}; return o, &o.ObjectMeta },
	"apps/v1 StatefulSet":      func() (any, *metav1.ObjectMeta) { o := &appsv1.StatefulSet{}; return o, &o.ObjectMeta },
	"autoscaling/v2 HorizontalPodAutoscaler": func() (any, *metav1.ObjectMeta) {
		o := &autoscalingv2.HorizontalPodAutoscaler{}
		return o, &o.ObjectMeta
	},
	"policy/v1 PodDisruptionBudget": func() (any, *metav1.ObjectMeta) { o := &policyv1.PodDisruptionBudget{}; return o, &o.ObjectMeta },
}

// newTyped returns an empty typed object of an allowed API version and
// kind (typedKinds).
func newTyped(apiVersion, kind string) (any, *metav1.ObjectMeta, bool) {
	mk, ok := typedKinds[apiVersion+" "+kind]
	if !ok {
		return nil, nil, false
	}
	o, meta := mk()
	return o, meta, true
}

// decodeManifests strictly decodes every YAML document of a stream into its
// typed Kubernetes object: an unknown or misspelt field, a duplicate key or a
// wrong type is an error.
func decodeManifests(t *testing.T, name string, r io.Reader) []manifest {
	t.Helper()
	var out []manifest
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for doc := 0; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if isEmptyYAML(raw) {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(raw, &tm); err != nil {
			t.Errorf("%s#%d: %v", name, doc, err)
			continue
		}
		obj, meta, ok := newTyped(tm.APIVersion, tm.Kind)
		if !ok {
			t.Errorf("%s#%d: %s %s: only apps/v1 and v1 objects of the known kinds are expected", name, doc, tm.APIVersion, tm.Kind)
			continue
		}
		if err := yaml.UnmarshalStrict(raw, obj); err != nil {
			t.Errorf("%s#%d (%s): strict decoding: %v", name, doc, tm.Kind, err)
			continue
		}
		out = append(out, manifest{file: name, doc: doc, kind: tm.Kind, obj: obj, meta: meta})
	}
	return out
}

func isEmptyYAML(b []byte) bool {
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "#") && line != "---" {
			return false
		}
	}
	return true
}

// loadKustomization strictly decodes deploy/kubernetes/kustomization.yaml.
func loadKustomization(t *testing.T) *ktypes.Kustomization {
	t.Helper()
	var k ktypes.Kustomization
	if err := yaml.UnmarshalStrict(readRepoFile(t, k8sDir+"/kustomization.yaml"), &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	return &k
}

// loadManifests decodes every manifest file that kustomization.yaml lists.
func loadManifests(t *testing.T) []manifest {
	t.Helper()
	var out []manifest
	for _, res := range loadKustomization(t).Resources {
		rel := k8sDir + "/" + res
		out = append(out, decodeManifests(t, rel, bytes.NewReader(readRepoFile(t, rel)))...)
	}
	if len(out) == 0 {
		t.Fatal("no manifests")
	}
	return out
}

// index of the manifests by kind and name.
type k8sIndex map[string]map[string]manifest

func indexManifests(t *testing.T, ms []manifest) k8sIndex {
	t.Helper()
	idx := k8sIndex{}
	for _, m := range ms {
		if idx[m.kind] == nil {
			idx[m.kind] = map[string]manifest{}
		}
		if prev, dup := idx[m.kind][m.meta.Name]; dup {
			t.Errorf("%s: same kind and name as %s", m, prev)
		}
		idx[m.kind][m.meta.Name] = m
	}
	return idx
}

func (idx k8sIndex) configMap(name string) *corev1.ConfigMap {
	if m, ok := idx["ConfigMap"][name]; ok {
		return m.obj.(*corev1.ConfigMap)
	}
	return nil
}

func (idx k8sIndex) secret(name string) *corev1.Secret {
	if m, ok := idx["Secret"][name]; ok {
		return m.obj.(*corev1.Secret)
	}
	return nil
}

// secretValue reads a key of a Secret from stringData or data.
func secretValue(s *corev1.Secret, key string) (string, bool) {
	if v, ok := s.StringData[key]; ok {
		return v, true
	}
	v, ok := s.Data[key]
	return string(v), ok
}

// workload is a Deployment or StatefulSet.
type workload struct {
	m        manifest
	selector *metav1.LabelSelector
	template *corev1.PodTemplateSpec
	claims   []corev1.PersistentVolumeClaim
}

func (idx k8sIndex) workloads() []workload {
	var out []workload
	for _, m := range idx["Deployment"] {
		d := m.obj.(*appsv1.Deployment)
		out = append(out, workload{m: m, selector: d.Spec.Selector, template: &d.Spec.Template})
	}
	for _, m := range idx["StatefulSet"] {
		s := m.obj.(*appsv1.StatefulSet)
		out = append(out, workload{m: m, selector: s.Spec.Selector, template: &s.Spec.Template, claims: s.Spec.VolumeClaimTemplates})
	}
	slices.SortFunc(out, func(a, b workload) int { return strings.Compare(a.m.meta.Name, b.m.meta.Name) })
	return out
}

// The cardano-node image cannot run as non-root (its entrypoint writes into
// the image); this container is the one documented exception to the
// non-root and read-only-root rules, and it must carry the settings that
// make its socket usable by the follower.
const nodeImagePrefix = "ghcr.io/intersectmbo/cardano-node:"

func isNodeContainer(c corev1.Container) bool { return strings.HasPrefix(c.Image, nodeImagePrefix) }

func TestKubernetesFilesListed(t *testing.T) {
	k := loadKustomization(t)
	if k.Kind != "" && k.Kind != "Kustomization" {
		t.Errorf("kustomization.yaml: kind %q", k.Kind)
	}
	if k.Namespace != "" {
		t.Errorf("kustomization.yaml sets namespace %q; the base must stay namespace-agnostic", k.Namespace)
	}
	files, _ := filepath.Glob(filepath.Join(repoRoot, filepath.FromSlash(k8sDir), "*.yaml"))
	var onDisk []string
	for _, f := range files {
		if b := filepath.Base(f); b != "kustomization.yaml" {
			onDisk = append(onDisk, b)
		}
	}
	listed := slices.Clone(k.Resources)
	slices.Sort(listed)
	slices.Sort(onDisk)
	if !slices.Equal(listed, onDisk) {
		t.Errorf("kustomization.yaml resources %v, files %v: every manifest must be listed exactly once", listed, onDisk)
	}
}

func TestKubernetesMetadata(t *testing.T) {
	for _, m := range loadManifests(t) {
		if m.meta.Namespace != "" {
			t.Errorf("%s: metadata.namespace %q; the manifests must stay namespace-agnostic", m, m.meta.Namespace)
		}
		for _, msg := range validation.IsDNS1123Subdomain(m.meta.Name) {
			t.Errorf("%s: name: %s", m, msg)
		}
		if m.kind == "Service" {
			for _, msg := range validation.IsDNS1035Label(m.meta.Name) {
				t.Errorf("%s: service name: %s", m, msg)
			}
		}
		checkLabels(t, m.String(), m.meta.Labels)
		if m.meta.Labels["app.kubernetes.io/name"] == "" {
			t.Errorf("%s: no app.kubernetes.io/name label", m)
		}
	}
}

func checkLabels(t *testing.T, where string, l map[string]string) {
	t.Helper()
	for k, v := range l {
		for _, msg := range validation.IsQualifiedName(k) {
			t.Errorf("%s: label key %q: %s", where, k, msg)
		}
		for _, msg := range validation.IsValidLabelValue(v) {
			t.Errorf("%s: label %s=%q: %s", where, k, v, msg)
		}
	}
}

func TestKubernetesWorkloads(t *testing.T) {
	idx := indexManifests(t, loadManifests(t))
	ws := idx.workloads()
	if len(ws) == 0 {
		t.Fatal("no Deployment or StatefulSet")
	}
	for _, w := range ws {
		where := w.m.String()
		sel, err := metav1.LabelSelectorAsSelector(w.selector)
		if err != nil || w.selector == nil || sel.Empty() {
			t.Errorf("%s: selector missing or invalid: %v", where, err)
		} else if !sel.Matches(labels.Set(w.template.Labels)) {
			t.Errorf("%s: selector %s does not match the template labels %v", where, sel, w.template.Labels)
		}
		checkLabels(t, where+" template", w.template.Labels)
		checkPod(t, where, idx, w)
	}

	// The writers: a StatefulSet of two (active and standby), each pod with
	// its own node and chain database.
	wm, ok := idx["StatefulSet"]["marlowe-follower-writer"]
	if !ok {
		t.Fatal("no StatefulSet marlowe-follower-writer")
	}
	ws0 := wm.obj.(*appsv1.StatefulSet)
	if ws0.Spec.Replicas == nil || *ws0.Spec.Replicas != 2 {
		t.Errorf("%s: replicas must be 2 (the active writer and its hot standby)", wm)
	}
	if ws0.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("%s: podManagementPolicy %q, want Parallel (OrderedReady would wait for the never-ready standby)", wm, ws0.Spec.PodManagementPolicy)
	}
	if ws0.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType {
		t.Errorf("%s: updateStrategy %q, want OnDelete (a RollingUpdate waits for the standby to become ready, which it never does)", wm, ws0.Spec.UpdateStrategy.Type)
	}
	checkFollowerPod(t, idx, wm.String(), &ws0.Spec.Template, "writer")
	nodeDB := false
	node := findContainer(&ws0.Spec.Template.Spec, isNodeContainer)
	for _, c := range ws0.Spec.VolumeClaimTemplates {
		if node != nil && mountAt(*node, "/data") != nil && mountAt(*node, "/data").Name == c.Name {
			nodeDB = slices.Contains(c.Spec.AccessModes, corev1.ReadWriteOnce)
		}
	}
	if !nodeDB {
		t.Errorf("%s: the node's chain database (/data) must be a ReadWriteOnce volumeClaimTemplate: one per writer", wm)
	}

	// The readers: a Deployment without node, claims or migration.
	rm, ok := idx["Deployment"]["marlowe-follower-reader"]
	if !ok {
		t.Fatal("no Deployment marlowe-follower-reader")
	}
	rd := rm.obj.(*appsv1.Deployment)
	if rd.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || rd.Spec.Strategy.RollingUpdate == nil ||
		rd.Spec.Strategy.RollingUpdate.MaxUnavailable == nil || rd.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue() != 0 {
		t.Errorf("%s: want a RollingUpdate with maxUnavailable 0 (a new reader ready before an old one goes)", rm)
	}
	checkFollowerPod(t, idx, rm.String(), &rd.Spec.Template, "reader")
	for _, w := range ws {
		if w.m.kind == "Deployment" && findContainer(&w.template.Spec, isNodeContainer) != nil {
			t.Errorf("%s: a Deployment with a cardano-node: its pods would share one chain database", w.m)
		}
	}

	// StatefulSets: their governing Service exists and is headless.
	for _, m := range idx["StatefulSet"] {
		s := m.obj.(*appsv1.StatefulSet)
		svc, ok := idx["Service"][s.Spec.ServiceName]
		if !ok {
			t.Errorf("%s: serviceName %q: no such Service", m, s.Spec.ServiceName)
		} else if svc.obj.(*corev1.Service).Spec.ClusterIP != corev1.ClusterIPNone {
			t.Errorf("%s: governing Service %s is not headless", m, s.Spec.ServiceName)
		}
	}
}

func allContainers(spec *corev1.PodSpec) []corev1.Container {
	return append(slices.Clone(spec.InitContainers), spec.Containers...)
}

// checkPod checks what every pod template must have.
func checkPod(t *testing.T, where string, idx k8sIndex, w workload) {
	t.Helper()
	spec := &w.template.Spec
	podSC := spec.SecurityContext
	if podSC == nil {
		podSC = &corev1.PodSecurityContext{}
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Errorf("%s: automountServiceAccountToken must be false (no API access needed)", where)
	}

	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		for _, msg := range validation.IsDNS1123Label(v.Name) {
			t.Errorf("%s: volume name %q: %s", where, v.Name, msg)
		}
		if _, dup := volumes[v.Name]; dup {
			t.Errorf("%s: volume %s declared twice", where, v.Name)
		}
		volumes[v.Name] = v
		if v.PersistentVolumeClaim != nil {
			if _, ok := idx["PersistentVolumeClaim"][v.PersistentVolumeClaim.ClaimName]; !ok {
				t.Errorf("%s: volume %s: no PersistentVolumeClaim %q", where, v.Name, v.PersistentVolumeClaim.ClaimName)
			}
		}
	}
	claimNames := map[string]bool{}
	for _, c := range w.claims {
		claimNames[c.Name] = true
	}
	mounted := map[string]bool{}

	for _, c := range allContainers(spec) {
		cw := fmt.Sprintf("%s container %s", where, c.Name)
		isInit := slices.ContainsFunc(spec.InitContainers, func(i corev1.Container) bool { return i.Name == c.Name })

		tag, digest := imageTag(c.Image)
		if !digest && (tag == "" || tag == "latest") {
			t.Errorf("%s: image %q must carry a tag other than latest", cw, c.Image)
		}
		// Rules the API server enforces, checked here without one.
		for _, msg := range validation.IsDNS1123Label(c.Name) {
			t.Errorf("%s: container name: %s", cw, msg)
		}
		for _, p := range c.Ports {
			for _, msg := range validation.IsValidPortName(p.Name) {
				t.Errorf("%s: port name %q: %s", cw, p.Name, msg)
			}
			for _, msg := range validation.IsValidPortNum(int(p.ContainerPort)) {
				t.Errorf("%s: port %d: %s", cw, p.ContainerPort, msg)
			}
		}
		for _, e := range c.Env {
			for _, msg := range validation.IsEnvVarName(e.Name) {
				t.Errorf("%s: env %q: %s", cw, e.Name, msg)
			}
		}

		// Resources: requests and limits for CPU and memory, limits >= requests.
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			req, okReq := c.Resources.Requests[r]
			lim, okLim := c.Resources.Limits[r]
			if !okReq || !okLim {
				t.Errorf("%s: resources: want %s request and limit", cw, r)
			} else if lim.Cmp(req) < 0 {
				t.Errorf("%s: %s limit %s below request %s", cw, r, lim.String(), req.String())
			}
		}

		// Security context (container settings win over the pod's).
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s: no securityContext", cw)
			sc = &corev1.SecurityContext{}
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: allowPrivilegeEscalation must be false", cw)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s: privileged", cw)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
			t.Errorf("%s: capabilities must drop ALL and add none", cw)
		}
		seccomp := podSC.SeccompProfile
		if sc.SeccompProfile != nil {
			seccomp = sc.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: seccompProfile must be RuntimeDefault", cw)
		}
		nonRoot := podSC.RunAsNonRoot
		if sc.RunAsNonRoot != nil {
			nonRoot = sc.RunAsNonRoot
		}
		uid := podSC.RunAsUser
		if sc.RunAsUser != nil {
			uid = sc.RunAsUser
		}
		if isNodeContainer(c) {
			checkNodeContainer(t, cw, c, podSC)
		} else {
			if nonRoot == nil || !*nonRoot || uid == nil || *uid == 0 {
				t.Errorf("%s: want runAsNonRoot: true and a non-zero runAsUser", cw)
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s: readOnlyRootFilesystem must be true", cw)
			}
		}

		// Probes: every long-running container has liveness and startup
		// probes; those a Service sends traffic to have readiness too.
		if !isInit {
			if c.LivenessProbe == nil {
				t.Errorf("%s: no livenessProbe", cw)
			}
			if c.StartupProbe == nil {
				t.Errorf("%s: no startupProbe", cw)
			}
			if servedByService(idx, w, c) && c.ReadinessProbe == nil {
				t.Errorf("%s: serves a Service but has no readinessProbe", cw)
			}
			for name, p := range map[string]*corev1.Probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
				if p != nil {
					checkProbe(t, cw+" "+name+"Probe", c, p)
				}
			}
		} else if c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil {
			t.Errorf("%s: init containers cannot have probes", cw)
		}

		// Volume mounts refer to volumes of the pod or claim templates.
		for _, vm := range c.VolumeMounts {
			if _, ok := volumes[vm.Name]; !ok && !claimNames[vm.Name] {
				t.Errorf("%s: volumeMount %s: no such volume", cw, vm.Name)
			}
			mounted[vm.Name] = true
		}

		checkEnvRefs(t, cw, idx, c)
	}
	for name := range volumes {
		if !mounted[name] {
			t.Errorf("%s: volume %s is mounted by no container", where, name)
		}
	}
	for name := range claimNames {
		if !mounted[name] {
			t.Errorf("%s: volumeClaimTemplate %s is mounted by no container", where, name)
		}
	}
}

// checkNodeContainer: the cardano-node sidecar runs as root (the image
// requires it) but with group 65532 and umask 0002, so that the socket it
// creates is writable by the follower's group.
func checkNodeContainer(t *testing.T, cw string, c corev1.Container, podSC *corev1.PodSecurityContext) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil || sc.RunAsGroup == nil || *sc.RunAsGroup != followerGID {
		t.Errorf("%s: runAsGroup must be %d (the follower's group) to share the socket", cw, followerGID)
	}
	if podSC.FSGroup == nil || *podSC.FSGroup != followerGID {
		t.Errorf("%s: the pod's fsGroup must be %d so the shared emptyDir is group %d", cw, followerGID, followerGID)
	}
	if !strings.Contains(strings.Join(c.Command, " "), "umask 0002") {
		t.Errorf("%s: command %q must set umask 0002 (group-writable socket)", cw, c.Command)
	}
}

// servedByService reports whether a Service selects the workload's pods and
// targets one of the container's ports.
func servedByService(idx k8sIndex, w workload, c corev1.Container) bool {
	for _, m := range idx["Service"] {
		svc := m.obj.(*corev1.Service)
		if len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.template.Labels)) {
			continue
		}
		for _, sp := range svc.Spec.Ports {
			if containerHasPort(c, sp.TargetPort) {
				return true
			}
		}
	}
	return false
}

func containerHasPort(c corev1.Container, p intstr.IntOrString) bool {
	for _, cp := range c.Ports {
		if (p.Type == intstr.String && cp.Name == p.StrVal) || (p.Type == intstr.Int && cp.ContainerPort == p.IntVal) {
			return true
		}
	}
	return false
}

func checkProbe(t *testing.T, where string, c corev1.Container, p *corev1.Probe) {
	t.Helper()
	switch {
	case p.HTTPGet != nil:
		if !containerHasPort(c, p.HTTPGet.Port) {
			t.Errorf("%s: port %s is not a port of the container", where, p.HTTPGet.Port.String())
		}
	case p.TCPSocket != nil:
		if !containerHasPort(c, p.TCPSocket.Port) {
			t.Errorf("%s: port %s is not a port of the container", where, p.TCPSocket.Port.String())
		}
	case p.Exec != nil:
		if len(p.Exec.Command) == 0 {
			t.Errorf("%s: empty exec command", where)
		}
	case p.GRPC != nil:
	default:
		t.Errorf("%s: no handler", where)
	}
	if p.TimeoutSeconds == 0 || p.PeriodSeconds == 0 || p.FailureThreshold == 0 {
		t.Errorf("%s: set timeoutSeconds, periodSeconds and failureThreshold explicitly", where)
	}
}

// checkEnvRefs: every ConfigMap and Secret that a container reads exists and
// has the keys it reads.
func checkEnvRefs(t *testing.T, cw string, idx k8sIndex, c corev1.Container) {
	t.Helper()
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			cm := idx.configMap(r.Name)
			optional := r.Optional != nil && *r.Optional
			if cm == nil && !optional {
				t.Errorf("%s: env %s: no ConfigMap %q", cw, e.Name, r.Name)
			} else if _, ok := cm.Data[r.Key]; cm != nil && !ok && !optional {
				t.Errorf("%s: env %s: ConfigMap %s has no key %s", cw, e.Name, r.Name, r.Key)
			}
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			s := idx.secret(r.Name)
			optional := r.Optional != nil && *r.Optional
			if s == nil && !optional {
				t.Errorf("%s: env %s: no Secret %q", cw, e.Name, r.Name)
			} else if s != nil {
				if _, ok := secretValue(s, r.Key); !ok && !optional {
					t.Errorf("%s: env %s: Secret %s has no key %s", cw, e.Name, r.Name, r.Key)
				}
			}
		}
	}
	for _, ef := range c.EnvFrom {
		if r := ef.ConfigMapRef; r != nil && idx.configMap(r.Name) == nil && (r.Optional == nil || !*r.Optional) {
			t.Errorf("%s: envFrom: no ConfigMap %q", cw, r.Name)
		}
		if r := ef.SecretRef; r != nil && idx.secret(r.Name) == nil && (r.Optional == nil || !*r.Optional) {
			t.Errorf("%s: envFrom: no Secret %q", cw, r.Name)
		}
	}
}

// containerEnv resolves a container's environment from its env and envFrom
// (later sources win, env over envFrom), and records which names come from a
// Secret.
func containerEnv(idx k8sIndex, c corev1.Container) (env map[string]string, fromSecret map[string]bool) {
	env, fromSecret = map[string]string{}, map[string]bool{}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil {
			if cm := idx.configMap(ef.ConfigMapRef.Name); cm != nil {
				for k, v := range cm.Data {
					env[ef.Prefix+k] = v
					delete(fromSecret, ef.Prefix+k)
				}
			}
		}
		if ef.SecretRef != nil {
			if s := idx.secret(ef.SecretRef.Name); s != nil {
				for k := range s.StringData {
					env[ef.Prefix+k], _ = secretValue(s, k)
					fromSecret[ef.Prefix+k] = true
				}
				for k := range s.Data {
					env[ef.Prefix+k], _ = secretValue(s, k)
					fromSecret[ef.Prefix+k] = true
				}
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
			delete(fromSecret, e.Name)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			if cm := idx.configMap(e.ValueFrom.ConfigMapKeyRef.Name); cm != nil {
				env[e.Name] = cm.Data[e.ValueFrom.ConfigMapKeyRef.Key]
			}
			delete(fromSecret, e.Name)
		case e.ValueFrom.SecretKeyRef != nil:
			if s := idx.secret(e.ValueFrom.SecretKeyRef.Name); s != nil {
				env[e.Name], _ = secretValue(s, e.ValueFrom.SecretKeyRef.Key)
			}
			fromSecret[e.Name] = true
		}
	}
	return env, fromSecret
}

func findContainer(spec *corev1.PodSpec, pred func(corev1.Container) bool) *corev1.Container {
	for _, c := range allContainers(spec) {
		if pred(c) {
			return &c
		}
	}
	return nil
}

// checkFollowerPod checks a follower pod's own wiring for its role (writer:
// with a cardano-node sidecar and a migration step; reader: neither):
// settings, socket sharing, ports, probes.
func checkFollowerPod(t *testing.T, idx k8sIndex, where string, tmpl *corev1.PodTemplateSpec, role string) {
	t.Helper()
	spec := &tmpl.Spec
	fol := findContainer(spec, func(c corev1.Container) bool { return c.Name == "marlowe-follower" })
	node := findContainer(spec, isNodeContainer)
	if fol == nil {
		t.Fatalf("%s: no container marlowe-follower", where)
	}
	switch {
	case role == "writer" && node == nil:
		t.Fatalf("%s: a writer needs a cardano-node sidecar", where)
	case role == "reader" && node != nil:
		t.Errorf("%s: a reader has no node connection: no cardano-node sidecar", where)
	}
	if !slices.Equal(fol.Args, []string{"run"}) || len(fol.Command) != 0 {
		t.Errorf("%s marlowe-follower: args %q command %q, want args [run] and the image's entrypoint", where, fol.Args, fol.Command)
	}
	mig := findContainer(spec, func(c corev1.Container) bool { return slices.Equal(c.Args, []string{"migrate"}) })
	switch {
	case role == "reader" && mig != nil:
		t.Errorf("%s: readers must not migrate (the writers do; a reader waits for the schema)", where)
	case role == "writer" && (mig == nil || !slices.ContainsFunc(spec.InitContainers, func(c corev1.Container) bool { return c.Name == mig.Name })):
		t.Errorf("%s: want an init container running `migrate`", where)
	case mig != nil && mig.Image != fol.Image:
		t.Errorf("%s: migrate image %q differs from the follower's %q", where, mig.Image, fol.Image)
	}

	env, fromSecret := containerEnv(idx, *fol)
	vars := configVars(t)
	var names []string
	for k := range env {
		names = append(names, k)
	}
	checkKnownVars(t, where+" marlowe-follower container env", marloweVarsIn(strings.Join(names, " ")))
	for k := range env {
		if v, ok := vars[k]; ok && v.Secret && !fromSecret[k] {
			t.Errorf("%s marlowe-follower: secret setting %s must come from a Secret", where, k)
		}
	}
	for _, k := range []string{"MARLOWE_RT_NODE_SOCKET", "MARLOWE_RT_NETWORK_MAGIC", "MARLOWE_RT_DATABASE_URL", "MARLOWE_RT_QUERY_PORT", "MARLOWE_RT_STREAMING_PORT"} {
		if env[k] == "" {
			t.Errorf("%s marlowe-follower: %s is not set", where, k)
		}
	}
	if env["MARLOWE_RT_ROLE"] != role {
		t.Errorf("%s marlowe-follower: MARLOWE_RT_ROLE %q, want %q", where, env["MARLOWE_RT_ROLE"], role)
	}
	if mig != nil {
		if migEnv, _ := containerEnv(idx, *mig); migEnv["MARLOWE_RT_DATABASE_URL"] != env["MARLOWE_RT_DATABASE_URL"] {
			t.Errorf("%s: migrate and marlowe-follower use different database URLs", where)
		}
	}
	if role == "writer" {
		checkNodeSidecar(t, idx, where, spec, *fol, *node, env)
	}

	if fsc := fol.SecurityContext; fsc == nil || fsc.RunAsGroup == nil || *fsc.RunAsGroup != followerGID || fsc.RunAsUser == nil || *fsc.RunAsUser != followerUID {
		t.Errorf("marlowe-follower: want runAsUser %d and runAsGroup %d (the image's user)", followerUID, followerGID)
	}
	if mountAt(*fol, env["MARLOWE_RT_DATA_DIR"]) == nil {
		t.Errorf("MARLOWE_RT_DATA_DIR %q is not a mounted volume (the root filesystem is read-only)", env["MARLOWE_RT_DATA_DIR"])
	}
	if mountAt(*fol, "/tmp") == nil {
		t.Errorf("marlowe-follower: no writable /tmp")
	}

	// Ports agree with the settings.
	for name, key := range map[string]string{"query": "MARLOWE_RT_QUERY_PORT", "streaming": "MARLOWE_RT_STREAMING_PORT"} {
		found := false
		for _, p := range fol.Ports {
			if p.Name == name {
				found = true
				if strconv.Itoa(int(p.ContainerPort)) != env[key] {
					t.Errorf("containerPort %s is %d but %s is %q", name, p.ContainerPort, key, env[key])
				}
			}
		}
		if !found {
			t.Errorf("marlowe-follower: no containerPort named %s", name)
		}
	}

	// Probes: liveness /healthz, readiness /readyz, a startup probe with
	// room for a slow start.
	probePath := func(p *corev1.Probe) string {
		if p == nil || p.HTTPGet == nil {
			return ""
		}
		return p.HTTPGet.Path
	}
	if probePath(fol.LivenessProbe) != "/healthz" {
		t.Errorf("marlowe-follower livenessProbe: want httpGet /healthz")
	}
	if probePath(fol.ReadinessProbe) != "/readyz" {
		t.Errorf("marlowe-follower readinessProbe: want httpGet /readyz")
	}
	if probePath(fol.StartupProbe) != "/healthz" {
		t.Errorf("marlowe-follower startupProbe: want httpGet /healthz")
	} else if d := time.Duration(fol.StartupProbe.PeriodSeconds*fol.StartupProbe.FailureThreshold) * time.Second; d < 30*time.Minute {
		t.Errorf("marlowe-follower startupProbe allows %v; want at least 30m for a slow first start", d)
	}
	if g := spec.TerminationGracePeriodSeconds; g == nil || *g < 30 {
		t.Errorf("terminationGracePeriodSeconds must leave the follower (~15 s) and the node time to stop")
	}
}

// checkNodeSidecar: a writer's node runs the network of the follower's magic
// and shares its socket with the follower.
func checkNodeSidecar(t *testing.T, idx k8sIndex, where string, spec *corev1.PodSpec, fol, node corev1.Container, env map[string]string) {
	t.Helper()
	// Network: the sidecar's NETWORK and the follower's magic agree.
	nodeEnv, _ := containerEnv(idx, node)
	if want, ok := networkMagic[nodeEnv["NETWORK"]]; !ok {
		t.Errorf("cardano-node NETWORK %q: want mainnet, preprod or preview", nodeEnv["NETWORK"])
	} else if env["MARLOWE_RT_NETWORK_MAGIC"] != want {
		t.Errorf("MARLOWE_RT_NETWORK_MAGIC %q, but the sidecar runs %s (magic %s)", env["MARLOWE_RT_NETWORK_MAGIC"], nodeEnv["NETWORK"], want)
	}
	if nodeEnv["NETWORK"] != "preprod" {
		t.Errorf("default network %q, want preprod", nodeEnv["NETWORK"])
	}

	// Socket: its directory is one volume, mounted in both containers,
	// writable by the follower (connect(2) needs write permission).
	sockDir := path.Dir(env["MARLOWE_RT_NODE_SOCKET"])
	folMount := mountAt(fol, sockDir)
	nodeMount := mountAt(node, sockDir)
	if folMount == nil || nodeMount == nil || folMount.Name != nodeMount.Name {
		t.Errorf("MARLOWE_RT_NODE_SOCKET %q: its directory must be the same volume in the follower and the sidecar", env["MARLOWE_RT_NODE_SOCKET"])
	} else {
		if folMount.ReadOnly {
			t.Errorf("the follower mounts the socket volume read-only")
		}
		for _, v := range spec.Volumes {
			if v.Name == folMount.Name && v.EmptyDir == nil {
				t.Errorf("socket volume %s: want an emptyDir shared inside the pod", v.Name)
			}
		}
	}
}

func mountAt(c corev1.Container, dir string) *corev1.VolumeMount {
	for i, vm := range c.VolumeMounts {
		if path.Clean(vm.MountPath) == path.Clean(dir) {
			return &c.VolumeMounts[i]
		}
	}
	return nil
}

func TestKubernetesServices(t *testing.T) {
	idx := indexManifests(t, loadManifests(t))
	ws := idx.workloads()
	for _, m := range idx["Service"] {
		svc := m.obj.(*corev1.Service)
		if len(svc.Spec.Selector) == 0 {
			t.Errorf("%s: no selector", m)
			continue
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		matched := selected(ws, sel)
		if len(matched) != 1 {
			t.Errorf("%s: selector %s matches %d workloads, want exactly 1", m, sel, len(matched))
			continue
		}
		for _, sp := range svc.Spec.Ports {
			for _, msg := range validation.IsValidPortName(sp.Name) {
				t.Errorf("%s: port name %q: %s", m, sp.Name, msg)
			}
			found := false
			for _, c := range matched[0].template.Spec.Containers {
				if containerHasPort(c, sp.TargetPort) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s: port %s targets %s, which no container of %s declares", m, sp.Name, sp.TargetPort.String(), matched[0].m)
			}
		}
	}
	svc, ok := idx["Service"]["marlowe-follower"]
	if !ok {
		t.Fatal("no Service marlowe-follower")
	}
	ports := map[int32]bool{}
	for _, p := range svc.obj.(*corev1.Service).Spec.Ports {
		ports[p.Port] = true
	}
	if !ports[3780] || !ports[3781] {
		t.Errorf("Service marlowe-follower: want ports 3780 and 3781")
	}
	// Clients go to the readers; the writers' Service is headless and lists
	// the standby too, for its /status and /metrics.
	if svc.obj.(*corev1.Service).Spec.Selector["app.kubernetes.io/component"] != "reader" {
		t.Errorf("Service marlowe-follower must select the readers")
	}
	if w, ok := idx["Service"]["marlowe-follower-writer"]; !ok {
		t.Error("no Service marlowe-follower-writer")
	} else if ws := w.obj.(*corev1.Service); ws.Spec.ClusterIP != corev1.ClusterIPNone || !ws.Spec.PublishNotReadyAddresses {
		t.Errorf("Service marlowe-follower-writer: want headless with publishNotReadyAddresses (the standby is never ready)")
	}
}

// TestKubernetesAutoscaling: the readers' HorizontalPodAutoscaler targets
// their Deployment with sound bounds; the PodDisruptionBudgets select
// exactly one workload, never the writers (their standby is never ready, so
// a budget would forbid evicting the active writer).
func TestKubernetesAutoscaling(t *testing.T) {
	idx := indexManifests(t, loadManifests(t))
	hpas := idx["HorizontalPodAutoscaler"]
	if len(hpas) != 1 {
		t.Fatalf("%d HorizontalPodAutoscalers, want 1 (the readers')", len(hpas))
	}
	for _, m := range hpas {
		h := m.obj.(*autoscalingv2.HorizontalPodAutoscaler)
		ref := h.Spec.ScaleTargetRef
		if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != "marlowe-follower-reader" {
			t.Errorf("%s: scaleTargetRef %+v, want apps/v1 Deployment marlowe-follower-reader", m, ref)
		} else if _, ok := idx["Deployment"][ref.Name]; !ok {
			t.Errorf("%s: no Deployment %s", m, ref.Name)
		}
		if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 || h.Spec.MaxReplicas < *h.Spec.MinReplicas {
			t.Errorf("%s: want minReplicas >= 2 and maxReplicas >= minReplicas", m)
		}
		cpu := false
		for _, mt := range h.Spec.Metrics {
			if mt.Type == autoscalingv2.ResourceMetricSourceType && mt.Resource != nil && mt.Resource.Name == corev1.ResourceCPU &&
				mt.Resource.Target.Type == autoscalingv2.UtilizationMetricType && mt.Resource.Target.AverageUtilization != nil {
				cpu = true
				if u := *mt.Resource.Target.AverageUtilization; u < 10 || u > 100 {
					t.Errorf("%s: CPU target %d%%", m, u)
				}
			}
		}
		if !cpu {
			t.Errorf("%s: want a CPU utilization target (the readers' containers request CPU)", m)
		}
		if d, ok := idx["Deployment"][ref.Name]; ok {
			for _, c := range d.obj.(*appsv1.Deployment).Spec.Template.Spec.Containers {
				if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
					t.Errorf("%s: container %s has no CPU request: utilization is undefined", d, c.Name)
				}
			}
		}
	}
	ws := idx.workloads()
	for _, m := range idx["PodDisruptionBudget"] {
		pdb := m.obj.(*policyv1.PodDisruptionBudget)
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || pdb.Spec.Selector == nil || sel.Empty() {
			t.Errorf("%s: selector missing or invalid: %v", m, err)
			continue
		}
		matched := selected(ws, sel)
		if len(matched) != 1 {
			t.Errorf("%s: selector %s matches %d workloads, want exactly 1", m, sel, len(matched))
			continue
		}
		if matched[0].m.kind == "StatefulSet" && matched[0].m.meta.Name == "marlowe-follower-writer" {
			t.Errorf("%s: selects the writers; their never-ready standby would block every eviction of the active writer", m)
		}
		if (pdb.Spec.MinAvailable == nil) == (pdb.Spec.MaxUnavailable == nil) {
			t.Errorf("%s: set exactly one of minAvailable and maxUnavailable", m)
		}
	}
}

// TestKubernetesConfigAndSecrets: settings are real, secrets are only in
// Secrets, placeholders are marked, and the reference PostgreSQL matches
// the database URL.
func TestKubernetesConfigAndSecrets(t *testing.T) {
	idx := indexManifests(t, loadManifests(t))
	vars := configVars(t)
	for _, m := range idx["ConfigMap"] {
		cm := m.obj.(*corev1.ConfigMap)
		for k := range cm.Data {
			for _, msg := range validation.IsEnvVarName(k) {
				t.Errorf("%s: key %s: %s (envFrom would skip it)", m, k, msg)
			}
			if strings.HasPrefix(k, "MARLOWE_RT_") {
				v, ok := vars[k]
				if !ok {
					t.Errorf("%s: %s is not a marlowe-follower setting", m, k)
				} else if v.Secret {
					t.Errorf("%s: %s is a secret setting: put it in a Secret", m, k)
				}
			}
		}
	}
	for _, m := range idx["Secret"] {
		s := m.obj.(*corev1.Secret)
		raw := string(readRepoFile(t, m.file))
		if !strings.Contains(raw, "PLACEHOLDER") {
			t.Errorf("%s: the file must say plainly that its values are placeholders", m)
		}
		for k, v := range s.StringData {
			for _, msg := range validation.IsEnvVarName(k) {
				t.Errorf("%s: key %s: %s", m, k, msg)
			}
			sensitive := strings.Contains(k, "PASSWORD") || strings.Contains(k, "TOKEN") || k == "MARLOWE_RT_DATABASE_URL"
			if sensitive && !strings.Contains(v, "CHANGE-ME") {
				t.Errorf("%s: %s must hold a marked placeholder (CHANGE-ME), not a value", m, k)
			}
			if strings.HasPrefix(k, "MARLOWE_RT_") {
				if _, ok := vars[k]; !ok {
					t.Errorf("%s: %s is not a marlowe-follower setting", m, k)
				}
			}
		}
		if len(s.Data) > 0 {
			t.Errorf("%s: use stringData for readable placeholders", m)
		}
	}

	// The reference PostgreSQL, when present, is what the URL points at.
	pgSecret := idx.secret("marlowe-postgres")
	folSecret := idx.secret("marlowe-follower-secrets")
	if pgSecret == nil || folSecret == nil {
		t.Skip("no reference PostgreSQL")
	}
	raw, _ := secretValue(folSecret, "MARLOWE_RT_DATABASE_URL")
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("MARLOWE_RT_DATABASE_URL: %v", err)
	}
	if _, ok := idx["Service"][u.Hostname()]; !ok {
		t.Errorf("MARLOWE_RT_DATABASE_URL host %q is no Service of the manifests", u.Hostname())
	}
	user, _ := secretValue(pgSecret, "POSTGRES_USER")
	db, _ := secretValue(pgSecret, "POSTGRES_DB")
	pw, _ := secretValue(pgSecret, "POSTGRES_PASSWORD")
	urlPW, _ := u.User.Password()
	if u.User.Username() != user || strings.TrimPrefix(u.Path, "/") != db || urlPW != pw {
		t.Errorf("MARLOWE_RT_DATABASE_URL user/database/password differ from the marlowe-postgres Secret")
	}
	if u.Port() != "5432" {
		t.Errorf("MARLOWE_RT_DATABASE_URL port %q", u.Port())
	}
}

// TestKubernetesLeaseTiming: the probes follow the writer lease (issue
// 22). The writers' readiness is /readyz (200 on the lease holder only:
// writer_standby, writer_lease_lapsed), their liveness /healthz with a
// window (periodSeconds x failureThreshold) longer than the lease's TTL,
// so that the kubelet never restarts a writer for a pause the lease rides
// out (a holder paused for less than the TTL renews and goes on; one
// paused longer loses the lease to the standby and exits 1 when it wakes,
// whatever the kubelet does). The readers' readiness window is longer
// than the TTL too, so that a failover's no_writer moment (from the
// lease's expiry to the standby's takeover: at most the TTL) does not take
// every reader out of the Service at once, while a writer gone for longer
// does. The TTL is the ConfigMap's MARLOWE_RT_WRITER_LEASE_TTL (or the
// binary's default), at least the binary's minimum.
func TestKubernetesLeaseTiming(t *testing.T) {
	idx := indexManifests(t, loadManifests(t))
	cm := idx.configMap("marlowe-follower-config")
	if cm == nil {
		t.Fatal("no ConfigMap marlowe-follower-config")
	}
	text, ok := cm.Data["MARLOWE_RT_WRITER_LEASE_TTL"]
	if !ok {
		t.Error("the ConfigMap does not set MARLOWE_RT_WRITER_LEASE_TTL: the probes' timing depends on it, say it")
		text = configVars(t)["MARLOWE_RT_WRITER_LEASE_TTL"].Default
	}
	ttl, err := time.ParseDuration(text)
	if err != nil || ttl < 300*time.Millisecond {
		t.Fatalf("MARLOWE_RT_WRITER_LEASE_TTL %q: want a duration of at least 300ms (%v)", text, err)
	}
	window := func(p *corev1.Probe) time.Duration {
		return time.Duration(p.PeriodSeconds*p.FailureThreshold) * time.Second
	}
	pod := func(kind, name string) *corev1.Container {
		m, ok := idx[kind][name]
		if !ok {
			t.Fatalf("no %s %s", kind, name)
		}
		var spec *corev1.PodSpec
		switch o := m.obj.(type) {
		case *appsv1.StatefulSet:
			spec = &o.Spec.Template.Spec
		case *appsv1.Deployment:
			spec = &o.Spec.Template.Spec
		}
		c := findContainer(spec, func(c corev1.Container) bool { return c.Name == "marlowe-follower" })
		if c == nil || c.LivenessProbe == nil || c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
			t.Fatalf("%s %s: no marlowe-follower container with liveness and readiness probes", kind, name)
		}
		return c
	}
	writer := pod("StatefulSet", "marlowe-follower-writer")
	if writer.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("the writers' readiness: %s, want /readyz (200 on the lease holder only)", writer.ReadinessProbe.HTTPGet.Path)
	}
	if w := window(writer.LivenessProbe); w <= ttl {
		t.Errorf("the writers' liveness fails after %s, within the lease's TTL %s: a pause the lease rides out would restart the holder", w, ttl)
	}
	reader := pod("Deployment", "marlowe-follower-reader")
	if reader.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("the readers' readiness: %s, want /readyz (503 no_writer once the lease has expired)", reader.ReadinessProbe.HTTPGet.Path)
	}
	if w := window(reader.ReadinessProbe); w <= ttl {
		t.Errorf("the readers' readiness fails after %s, within the lease's TTL %s: every failover would take all readers out of the Service", w, ttl)
	}
}

// TestKubernetesStrictDecodingIsLive guards against a decoder that silently
// accepts anything: a misspelt field must be rejected.
func TestKubernetesStrictDecodingIsLive(t *testing.T) {
	bad := "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\nspec:\n  replica: 1\n"
	var obj appsv1.Deployment
	if err := yaml.UnmarshalStrict([]byte(bad), &obj); err == nil {
		t.Error("strict decoding accepted the unknown field spec.replica")
	}
	dup := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: \"1\"\n  a: \"2\"\n"
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict([]byte(dup), &cm); err == nil {
		t.Error("strict decoding accepted a duplicate key")
	}
}

// TestKustomizeBuild builds the kustomization with kustomize's own library
// (what `kubectl apply -k` runs) and strictly decodes its output.
func TestKustomizeBuild(t *testing.T) {
	dir := filepath.Join(repoRoot, filepath.FromSlash(k8sDir))
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resMap, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", k8sDir, err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	built := decodeManifests(t, "kustomize build output", bytes.NewReader(out))
	sources := loadManifests(t)
	if len(built) != len(sources) {
		t.Errorf("kustomize build gave %d objects, the files hold %d", len(built), len(sources))
	}
	partOf := loadKustomization(t)
	wantLabels := map[string]string{}
	for _, l := range partOf.Labels {
		for k, v := range l.Pairs {
			wantLabels[k] = v
		}
	}
	for _, m := range built {
		if m.meta.Namespace != "" {
			t.Errorf("%s: built with namespace %q", m, m.meta.Namespace)
		}
		for k, v := range wantLabels {
			if m.meta.Labels[k] != v {
				t.Errorf("%s: built without label %s=%s", m, k, v)
			}
		}
	}
	// The built objects pass the same workload checks as the sources.
	idx := indexManifests(t, built)
	for _, w := range idx.workloads() {
		sel, err := metav1.LabelSelectorAsSelector(w.selector)
		if err != nil || !sel.Matches(labels.Set(w.template.Labels)) {
			t.Errorf("%s: after kustomize, the selector no longer matches the template", w.m)
		}
	}
	if os.Getenv("VALIDATE_PRINT_KUSTOMIZE") != "" {
		t.Logf("kustomize build output:\n%s", out)
	}
}

// TestKustomizeDocumentedOverlay builds the production overlay example of
// docs/deploy.md against the real base, so the documentation cannot drift
// into an example that does not build.
func TestKustomizeDocumentedOverlay(t *testing.T) {
	doc := string(readRepoFile(t, "docs/deploy.md"))
	const header = "# overlays/production/kustomization.yaml\n"
	start := strings.Index(doc, "```yaml\n"+header)
	if start < 0 {
		t.Fatal("docs/deploy.md: no ```yaml block starting with " + strings.TrimSpace(header))
	}
	body := doc[start+len("```yaml\n"):]
	end := strings.Index(body, "\n```")
	if end < 0 {
		t.Fatal("docs/deploy.md: unterminated overlay example")
	}
	body = body[:end+1]

	// Lay the overlay out as the example assumes: <root>/overlays/production
	// next to <root>/deploy, with deploy pointing at the real directory.
	root := t.TempDir()
	overlay := filepath.Join(root, "overlays", "production")
	if err := os.MkdirAll(overlay, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(deployDir, filepath.Join(root, "deploy")); err != nil {
		t.Fatal(err)
	}
	var k ktypes.Kustomization
	if err := yaml.UnmarshalStrict([]byte(body), &k); err != nil {
		t.Fatalf("overlay example: %v", err)
	}
	files := map[string]string{
		"kustomization.yaml":   body,
		"follower-secrets.env": "MARLOWE_RT_DATABASE_URL=postgres://u:p@db.example.com:5432/marlowe?sslmode=verify-full\nMARLOWE_RT_STREAMING_TOKEN=t0ken\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(overlay, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), overlay)
	if err != nil {
		t.Fatalf("kustomize build of the documented overlay: %v", err)
	}
	out, err := resMap.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	built := decodeManifests(t, "overlay build output", bytes.NewReader(out))
	idx := indexManifests(t, built)
	for _, m := range built {
		if m.meta.Namespace != k.Namespace {
			t.Errorf("%s: namespace %q, want %q", m, m.meta.Namespace, k.Namespace)
		}
		if strings.Contains(m.meta.Name, "postgres") {
			t.Errorf("%s: the overlay should have removed the reference PostgreSQL", m)
		}
	}
	s := idx.secret("marlowe-follower-secrets")
	if s == nil {
		t.Fatal("overlay: no Secret marlowe-follower-secrets")
	}
	if v, _ := secretValue(s, "MARLOWE_RT_DATABASE_URL"); !strings.Contains(v, "db.example.com") {
		t.Errorf("overlay: the Secret still holds the placeholder URL")
	}
	ws := idx.workloads()
	if len(ws) == 0 {
		t.Fatal("overlay: no workloads")
	}
	for _, w := range ws {
		for _, c := range allContainers(&w.template.Spec) {
			if strings.Contains(c.Image, "marlowe-follower") && c.Image != "registry.example.com/marlowe-follower:v0.1.0" {
				t.Errorf("overlay: %s container %s image %q not replaced", w.m, c.Name, c.Image)
			}
			checkEnvRefs(t, "overlay "+w.m.String()+" container "+c.Name, idx, c)
		}
	}
}

// selected returns the workloads whose pod template sel matches.
func selected(ws []workload, sel labels.Selector) []workload {
	var matched []workload
	for _, w := range ws {
		if sel.Matches(labels.Set(w.template.Labels)) {
			matched = append(matched, w)
		}
	}
	return matched
}
