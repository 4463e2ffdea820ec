package deploytest

import (
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/paysuite/payments/pkg/transfersig"
	"github.com/paysuite/payments/test/support/repo"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// The subset of the Kubernetes objects that the tests look at, decoded from
// kustomize's output with their JSON field names.
type (
	meta struct {
		Name      string            `json:"name"`
		Namespace string            `json:"namespace"`
		Labels    map[string]string `json:"labels"`
	}
	object struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   meta   `json:"metadata"`
	}
	selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
	deployment struct {
		object
		Spec struct {
			Replicas *int        `json:"replicas"`
			Selector selector    `json:"selector"`
			Template podTemplate `json:"template"`
		} `json:"spec"`
	}
	job struct {
		object
		Spec struct {
			BackoffLimit *int        `json:"backoffLimit"`
			Template     podTemplate `json:"template"`
		} `json:"spec"`
	}
	podTemplate struct {
		Metadata meta    `json:"metadata"`
		Spec     podSpec `json:"spec"`
	}
	podSpec struct {
		ServiceAccountName           string `json:"serviceAccountName"`
		AutomountServiceAccountToken *bool  `json:"automountServiceAccountToken"`
		RestartPolicy                string `json:"restartPolicy"`
		SecurityContext              *struct {
			RunAsNonRoot *bool `json:"runAsNonRoot"`
			RunAsUser    *int  `json:"runAsUser"`
		} `json:"securityContext"`
		InitContainers []container `json:"initContainers"`
		Containers     []container `json:"containers"`
		Volumes        []struct {
			Name   string `json:"name"`
			Secret *struct {
				SecretName string `json:"secretName"`
			} `json:"secret"`
		} `json:"volumes"`
	}
	container struct {
		Name    string   `json:"name"`
		Image   string   `json:"image"`
		Command []string `json:"command"`
		Args    []string `json:"args"`
		Ports   []struct {
			Name          string `json:"name"`
			ContainerPort int    `json:"containerPort"`
		} `json:"ports"`
		EnvFrom []struct {
			ConfigMapRef *struct {
				Name string `json:"name"`
			} `json:"configMapRef"`
			SecretRef *struct {
				Name string `json:"name"`
			} `json:"secretRef"`
		} `json:"envFrom"`
		Env          []envVar `json:"env"`
		VolumeMounts []struct {
			Name      string `json:"name"`
			MountPath string `json:"mountPath"`
			ReadOnly  bool   `json:"readOnly"`
		} `json:"volumeMounts"`
		StartupProbe   *probe `json:"startupProbe"`
		ReadinessProbe *probe `json:"readinessProbe"`
		LivenessProbe  *probe `json:"livenessProbe"`
		Resources      struct {
			Requests map[string]string `json:"requests"`
			Limits   map[string]string `json:"limits"`
		} `json:"resources"`
		SecurityContext *struct {
			AllowPrivilegeEscalation *bool `json:"allowPrivilegeEscalation"`
			ReadOnlyRootFilesystem   *bool `json:"readOnlyRootFilesystem"`
			RunAsNonRoot             *bool `json:"runAsNonRoot"`
			Capabilities             *struct {
				Drop []string `json:"drop"`
			} `json:"capabilities"`
		} `json:"securityContext"`
	}
	envVar struct {
		Name      string  `json:"name"`
		Value     *string `json:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name     string `json:"name"`
				Key      string `json:"key"`
				Optional *bool  `json:"optional"`
			} `json:"secretKeyRef"`
			ConfigMapKeyRef *struct {
				Name string `json:"name"`
				Key  string `json:"key"`
			} `json:"configMapKeyRef"`
			ResourceFieldRef *struct {
				Resource string `json:"resource"`
			} `json:"resourceFieldRef"`
		} `json:"valueFrom"`
	}
	probe struct {
		HTTPGet *struct {
			Path string `json:"path"`
			Port any    `json:"port"`
		} `json:"httpGet"`
	}
	k8sService struct {
		object
		Spec struct {
			Selector map[string]string `json:"selector"`
			Ports    []struct {
				Name       string `json:"name"`
				Port       int    `json:"port"`
				TargetPort any    `json:"targetPort"`
			} `json:"ports"`
		} `json:"spec"`
	}
	pdb struct {
		object
		Spec struct {
			MinAvailable   any      `json:"minAvailable"`
			MaxUnavailable any      `json:"maxUnavailable"`
			Selector       selector `json:"selector"`
		} `json:"spec"`
	}
	hpa struct {
		object
		Spec struct {
			ScaleTargetRef struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Name       string `json:"name"`
			} `json:"scaleTargetRef"`
			MinReplicas *int  `json:"minReplicas"`
			MaxReplicas int   `json:"maxReplicas"`
			Metrics     []any `json:"metrics"`
		} `json:"spec"`
	}
	configMap struct {
		object
		Data map[string]string `json:"data"`
	}
)

// built is one kustomize build, indexed by kind and name.
type built struct {
	objects     map[string]map[string][]byte // kind -> name -> YAML
	deployments map[string]deployment
	services    map[string]k8sService
	pdbs        map[string]pdb
	hpas        map[string]hpa
	jobs        map[string]job
	configMaps  map[string]configMap
}

// kustomizeBuild builds dir (relative to deploy/k8s) as `kubectl apply -k`
// would, and decodes the result.
func kustomizeBuild(tb testing.TB, dir string) built {
	tb.Helper()
	path := filepath.Join(repo.Path(tb), "deploy", "k8s", dir)
	resMap, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), path)
	if err != nil {
		tb.Fatalf("kustomize build %s: %v", dir, err)
	}
	b := built{
		objects:     map[string]map[string][]byte{},
		deployments: map[string]deployment{},
		services:    map[string]k8sService{},
		pdbs:        map[string]pdb{},
		hpas:        map[string]hpa{},
		jobs:        map[string]job{},
		configMaps:  map[string]configMap{},
	}
	for _, res := range resMap.Resources() {
		y, err := res.AsYAML()
		if err != nil {
			tb.Fatal(err)
		}
		kind, name := res.GetKind(), res.GetName()
		if b.objects[kind] == nil {
			b.objects[kind] = map[string][]byte{}
		}
		if _, dup := b.objects[kind][name]; dup {
			tb.Fatalf("%s: two %s named %s", dir, kind, name)
		}
		b.objects[kind][name] = y
		switch kind {
		case "Deployment":
			b.deployments[name] = decode[deployment](tb, y)
		case "Service":
			b.services[name] = decode[k8sService](tb, y)
		case "PodDisruptionBudget":
			b.pdbs[name] = decode[pdb](tb, y)
		case "HorizontalPodAutoscaler":
			b.hpas[name] = decode[hpa](tb, y)
		case "Job":
			b.jobs[name] = decode[job](tb, y)
		case "ConfigMap":
			b.configMaps[name] = decode[configMap](tb, y)
		}
	}
	return b
}

func decode[T any](tb testing.TB, y []byte) T {
	tb.Helper()
	var v T
	if err := yaml.Unmarshal(y, &v); err != nil {
		tb.Fatalf("decode %T: %v\n%s", v, err, y)
	}
	return v
}

// overlay says what one kustomization must produce.
type overlay struct {
	dir       string
	namespace string
	image     string
	// replicas is the fixed replica count, or 0 when an HPA owns it.
	replicas int
	// minReplicas is the HPAs' floor (0: no HPAs).
	minReplicas int
	// topicsRF is the replication factor the topics Job creates topics with.
	topicsRF int
	// kafkaSecured: every Kafka client authenticates as its own principal
	// over TLS, and the topics Job creates the ACLs.
	kafkaSecured bool
}

var overlays = []overlay{
	{dir: "base", namespace: "", image: "paysuite/payments:latest", minReplicas: 2, topicsRF: 3},
	{dir: "overlays/dev", namespace: "payments-dev", image: "paysuite/payments:dev", replicas: 1, topicsRF: 1},
	{dir: "overlays/prod", namespace: "payments", image: "ghcr.io/paysuite/payments:1.0.0", minReplicas: 3, topicsRF: 3, kafkaSecured: true},
}

// partitions is the partition count of every contract topic: the most
// consumers of one group that can be active at once.
const partitions = 12

func TestKustomizeOverlays(t *testing.T) {
	known := knownEnv(t)
	for _, ov := range overlays {
		t.Run(ov.dir, func(t *testing.T) {
			b := kustomizeBuild(t, ov.dir)

			var names []string
			for _, svc := range services {
				names = append(names, svc.Name)
			}
			names = append(names, "console")
			sort.Strings(names)
			if diff := cmp.Diff(names, sortedKeys(b.deployments)); diff != "" {
				t.Errorf("deployments mismatch (-want +got):\n%s", diff)
			}
			checkNamespaces(t, b, ov.namespace)
			checkNoSecrets(t, b)

			for _, svc := range services {
				t.Run(svc.Name, func(t *testing.T) {
					d, ok := b.deployments[svc.Name]
					if !ok {
						t.Fatal("no Deployment")
					}
					checkDeployment(t, b, ov, svc, d, known)
					checkService(t, b, svc, d)
					checkPDB(t, b, svc, d)
					checkHPA(t, b, ov, svc)
				})
			}
			checkTopicsJob(t, b, ov)
			t.Run("console", func(t *testing.T) { checkConsole(t, b, ov.dir, known) })
		})
	}
}

// checkConsole: one replica (sessions live in memory), the console
// binary on 8084 behind a Service, the services by their cluster names,
// the services' token issuer, and no database or Kafka setting.
func checkConsole(t *testing.T, b built, overlay string, known map[string]bool) {
	d, ok := b.deployments["console"]
	if !ok {
		t.Fatal("no console Deployment")
	}
	if len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("containers = %d, want 1", len(d.Spec.Template.Spec.Containers))
	}
	if r := d.Spec.Replicas; r == nil || *r != 1 {
		t.Errorf("replicas = %v, want 1: sessions are in the process's memory", r)
	}
	c := d.Spec.Template.Spec.Containers[0]
	if diff := cmp.Diff([]string{"/usr/local/bin/console"}, c.Command); diff != "" {
		t.Errorf("command mismatch (-want +got):\n%s", diff)
	}
	checkContainerSecurity(t, "console", c)
	checkResources(t, "console", c)
	envs := containerEnv(t, b, c)
	for name := range envs {
		if !known[name] {
			t.Errorf("environment variable %s is read by no suite program", name)
		}
		if strings.HasPrefix(name, "DATABASE_") || strings.HasPrefix(name, "KAFKA_") {
			t.Errorf("the console has %s: it must reach the services only over HTTP", name)
		}
	}
	want := map[string]string{
		"CONSOLE_HTTP_ADDR":         ":8084",
		"CONSOLE_TRANSFERS_URL":     "http://transfers:8080",
		"CONSOLE_LEDGER_URL":        "http://ledger:8081",
		"CONSOLE_ANTIFRAUD_URL":     "http://antifraud:8082",
		"CONSOLE_NOTIFICATIONS_URL": "http://notifications:8083",
	}
	if overlay == "overlays/prod" {
		for _, s := range []string{"TRANSFERS", "LEDGER", "ANTIFRAUD", "NOTIFICATIONS"} {
			want["CONSOLE_"+s+"_URL"] = "https://" + strings.ToLower(s) + ".payments.example.com"
		}
	}
	for k, v := range want {
		if envs[k] != v {
			t.Errorf("%s = %q, want %q", k, envs[k], v)
		}
	}
	// Operator tokens go to the services over https, but in the
	// development cluster, whose switch says otherwise.
	if got, dev := envs["DEV_INSECURE_HTTP"], overlay == "overlays/dev"; (got == "true") != dev || (!dev && got != "") {
		t.Errorf("console DEV_INSECURE_HTTP = %q: want true in the development overlay only", got)
	}
	transfers := containerEnv(t, b, b.deployments["transfers"].Spec.Template.Spec.Containers[0])
	// The transfers service forwards an operator's token to the ledger
	// (an apply of a held result): over https, but in the development
	// cluster, whose switch says otherwise.
	wantLedger := "http://ledger:8081"
	if overlay == "overlays/prod" {
		wantLedger = "https://ledger.payments.example.com"
	}
	if got := transfers["TRANSFERS_LEDGER_URL"]; got != wantLedger {
		t.Errorf("transfers TRANSFERS_LEDGER_URL = %q, want %q", got, wantLedger)
	}
	if overlay == "overlays/dev" && transfers["DEV_INSECURE_HTTP"] != "true" {
		t.Errorf("transfers DEV_INSECURE_HTTP = %q in the development overlay: its http TRANSFERS_LEDGER_URL would stop it", transfers["DEV_INSECURE_HTTP"])
	}
	for _, k := range []string{"AUTH_JWKS_URL", "AUTH_ISSUER", "AUTH_AUDIENCE"} {
		if envs[k] == "" || envs[k] != transfers[k] {
			t.Errorf("%s = %q, want the services' %q", k, envs[k], transfers[k])
		}
	}
	s, ok := b.services["console"]
	if !ok || len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != 8084 {
		t.Errorf("console Service = %+v, want one port 8084", s)
	}
}

func checkNamespaces(t *testing.T, b built, want string) {
	t.Helper()
	for kind, byName := range b.objects {
		for name, y := range byName {
			if got := decode[object](t, y).Metadata.Namespace; got != want {
				t.Errorf("%s %s: namespace %q, want %q", kind, name, got, want)
			}
		}
	}
}

// Real credentials never enter the repository: no overlay renders a Secret,
// and no ConfigMap holds a secret's key.
func checkNoSecrets(t *testing.T, b built) {
	t.Helper()
	if s := b.objects["Secret"]; len(s) > 0 {
		t.Errorf("Secrets rendered from the repository: %v", sortedKeys(s))
	}
	for name, cm := range b.configMaps {
		for _, secret := range []string{"DATABASE_URL", "WEBHOOK_SECRET", "KAFKA_SASL_PASSWORD"} {
			if _, ok := cm.Data[secret]; ok {
				t.Errorf("ConfigMap %s holds %s", name, secret)
			}
		}
	}
}

func checkDeployment(t *testing.T, b built, ov overlay, svc service, d deployment, known map[string]bool) {
	t.Helper()
	spec := d.Spec.Template.Spec
	labels := d.Spec.Template.Metadata.Labels
	for k, v := range d.Spec.Selector.MatchLabels {
		if labels[k] != v {
			t.Errorf("selector %s=%s does not match the pod labels %v", k, v, labels)
		}
	}
	if len(d.Spec.Selector.MatchLabels) == 0 {
		t.Error("empty selector")
	}
	switch {
	case ov.replicas > 0 && (d.Spec.Replicas == nil || *d.Spec.Replicas != ov.replicas):
		t.Errorf("replicas = %v, want %d", deref(d.Spec.Replicas), ov.replicas)
	case ov.replicas == 0 && d.Spec.Replicas != nil:
		t.Errorf("replicas = %d fixed although an HPA owns the count", *d.Spec.Replicas)
	}

	if sc := spec.SecurityContext; sc == nil || !isTrue(sc.RunAsNonRoot) || deref(sc.RunAsUser) != 65532 {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and runAsUser 65532", sc)
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("the service account token is mounted")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Image != ov.image {
		t.Errorf("image = %q, want %q", c.Image, ov.image)
	}
	if diff := cmp.Diff([]string{svc.Binary}, c.Command); diff != "" {
		t.Errorf("command mismatch (-want +got):\n%s", diff)
	}
	if len(c.Ports) != 1 || c.Ports[0].Name != "http" || c.Ports[0].ContainerPort != svc.Port {
		t.Errorf("ports = %+v, want http %d", c.Ports, svc.Port)
	}
	for _, tc := range []struct {
		name string
		p    *probe
		path string
	}{
		{"readiness", c.ReadinessProbe, "/readyz"},
		{"liveness", c.LivenessProbe, "/healthz"},
		{"startup", c.StartupProbe, "/healthz"},
	} {
		if tc.p == nil || tc.p.HTTPGet == nil {
			t.Errorf("no %s probe", tc.name)
			continue
		}
		if tc.p.HTTPGet.Path != tc.path || tc.p.HTTPGet.Port != "http" {
			t.Errorf("%s probe GET %s on port %v, want %s on http", tc.name, tc.p.HTTPGet.Path, tc.p.HTTPGet.Port, tc.path)
		}
	}
	checkResources(t, "container "+c.Name, c)
	checkContainerSecurity(t, "container "+c.Name, c)

	// Migrations run once per rollout in the init container; the service
	// itself does not migrate.
	if len(spec.InitContainers) != 1 {
		t.Fatalf("%d init containers, want 1 (migrate)", len(spec.InitContainers))
	}
	ic := spec.InitContainers[0]
	if diff := cmp.Diff([]string{svc.Binary, "migrate"}, ic.Command); diff != "" {
		t.Errorf("init container command mismatch (-want +got):\n%s", diff)
	}
	if ic.Image != ov.image {
		t.Errorf("init container image = %q, want %q", ic.Image, ov.image)
	}
	checkResources(t, "init container", ic)
	checkContainerSecurity(t, "init container", ic)

	for _, cont := range []container{ic, c} {
		envs := containerEnv(t, b, cont)
		for name := range envs {
			if !known[name] {
				t.Errorf("%s: environment variable %s is read by no suite program", cont.Name, name)
			}
		}
		for _, tc := range []struct{ name, want string }{
			{"DATABASE_URL", "secret " + svc.Name + "-secrets/DATABASE_URL"},
			{"HTTP_ADDR", ":" + strconv.Itoa(svc.Port)},
			{"MIGRATE_ON_START", "false"},
		} {
			if got := envs[tc.name]; got != tc.want {
				t.Errorf("%s: %s = %q, want %q", cont.Name, tc.name, got, tc.want)
			}
		}
		if envs["KAFKA_BROKERS"] == "" {
			t.Errorf("%s: KAFKA_BROKERS is not set", cont.Name)
		}
		checkKafkaSecurity(t, b, ov, spec, cont, svc.Name, svc.Name+"-kafka")
		checkAuthEnv(t, cont.Name, ov.dir, envs)
	}
	if svc.Name == "notifications" {
		envs := containerEnv(t, b, c)
		if got, want := envs["WEBHOOK_SECRET"], "secret notifications-secrets/WEBHOOK_SECRET"; got != want {
			t.Errorf("WEBHOOK_SECRET = %q, want %q", got, want)
		}
		if ch := envs["NOTIFY_CHANNEL"]; ch != "log" && ch != "webhook" {
			t.Errorf("NOTIFY_CHANNEL = %q", ch)
		}
		if ov.dir == "overlays/prod" && (envs["NOTIFY_CHANNEL"] != "webhook" || envs["WEBHOOK_DEFAULT_URL"] == "") {
			t.Errorf("production notifications: NOTIFY_CHANNEL %q, WEBHOOK_DEFAULT_URL %q", envs["NOTIFY_CHANNEL"], envs["WEBHOOK_DEFAULT_URL"])
		}
	}
}

// containerEnv resolves what the container sees: envFrom ConfigMaps (which
// must exist in the build), then env. A value from a Secret reads
// "secret NAME/KEY"; DATABASE_URL and WEBHOOK_SECRET must come from one.
func containerEnv(t *testing.T, b built, c container) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef == nil {
			t.Errorf("%s: envFrom other than a ConfigMap", c.Name)
			continue
		}
		cm, ok := b.configMaps[ef.ConfigMapRef.Name]
		if !ok {
			t.Errorf("%s: envFrom ConfigMap %s is not in the build", c.Name, ef.ConfigMapRef.Name)
			continue
		}
		for k, v := range cm.Data {
			out[k] = v
		}
	}
	for _, e := range c.Env {
		switch {
		case e.Value != nil:
			out[e.Name] = *e.Value
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			out[e.Name] = "secret " + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		case e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			v, ok := b.configMaps[ref.Name].Data[ref.Key]
			if !ok {
				t.Errorf("%s: %s from missing ConfigMap key %s/%s", c.Name, e.Name, ref.Name, ref.Key)
			}
			out[e.Name] = v
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
			out[e.Name] = "resource " + e.ValueFrom.ResourceFieldRef.Resource
		default:
			t.Errorf("%s: env %s has no value", c.Name, e.Name)
		}
		if (e.Name == "DATABASE_URL" || e.Name == "WEBHOOK_SECRET") && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
			t.Errorf("%s: %s is not read from a Secret", c.Name, e.Name)
		}
	}
	return out
}

// checkKafkaSecurity: in a secured overlay the container authenticates
// with SCRAM-SHA-512 as user over TLS, its password is a file of the Secret
// secret (its own, never another principal's) and its CA a file of the
// kafka-ca Secret, both mounted read-only; no password is a literal.
func checkKafkaSecurity(t *testing.T, b built, ov overlay, spec podSpec, c container, user, secret string) {
	t.Helper()
	envs := containerEnv(t, b, c)
	if _, ok := envs["KAFKA_SASL_PASSWORD"]; ok {
		t.Errorf("%s: KAFKA_SASL_PASSWORD is set; use KAFKA_SASL_PASSWORD_FILE and a mounted Secret", c.Name)
	}
	if !ov.kafkaSecured {
		return
	}
	for _, tc := range []struct{ name, want string }{
		{"KAFKA_SASL_MECHANISM", "SCRAM-SHA-512"},
		{"KAFKA_SASL_USERNAME", user},
		{"KAFKA_TLS", "true"},
	} {
		if got := envs[tc.name]; got != tc.want {
			t.Errorf("%s: %s = %q, want %q", c.Name, tc.name, got, tc.want)
		}
	}
	// The Secret a file of the container comes from, read-only, and its key.
	fileSource := func(path string) (secretName, key string) {
		for _, m := range c.VolumeMounts {
			if !strings.HasPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/") {
				continue
			}
			if !m.ReadOnly {
				t.Errorf("%s: %s is mounted writable", c.Name, m.MountPath)
			}
			for _, v := range spec.Volumes {
				if v.Name == m.Name && v.Secret != nil {
					return v.Secret.SecretName, strings.TrimPrefix(path, strings.TrimSuffix(m.MountPath, "/")+"/")
				}
			}
		}
		return "", ""
	}
	if s, k := fileSource(envs["KAFKA_SASL_PASSWORD_FILE"]); s != secret || k != "password" {
		t.Errorf("%s: KAFKA_SASL_PASSWORD_FILE %q is key %q of Secret %q, want key password of %s",
			c.Name, envs["KAFKA_SASL_PASSWORD_FILE"], k, s, secret)
	}
	if s, k := fileSource(envs["KAFKA_TLS_CA_FILE"]); s != "kafka-ca" || k != "ca.crt" {
		t.Errorf("%s: KAFKA_TLS_CA_FILE %q is key %q of Secret %q, want key ca.crt of kafka-ca",
			c.Name, envs["KAFKA_TLS_CA_FILE"], k, s)
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil && strings.HasSuffix(v.Secret.SecretName, "-kafka") && v.Secret.SecretName != secret {
			t.Errorf("%s: the pod mounts another principal's credential %s", c.Name, v.Secret.SecretName)
		}
	}
}

func checkResources(t *testing.T, what string, c container) {
	t.Helper()
	for _, r := range []string{"cpu", "memory"} {
		if c.Resources.Requests[r] == "" {
			t.Errorf("%s: no %s request", what, r)
		}
	}
	if c.Resources.Limits["memory"] == "" {
		t.Errorf("%s: no memory limit", what)
	}
}

func checkContainerSecurity(t *testing.T, what string, c container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Errorf("%s: no securityContext", what)
		return
	}
	if !isTrue(sc.ReadOnlyRootFilesystem) || !isTrue(sc.RunAsNonRoot) || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: securityContext readOnlyRootFilesystem %v, runAsNonRoot %v, allowPrivilegeEscalation %v: want true, true, false",
			what, isTrue(sc.ReadOnlyRootFilesystem), isTrue(sc.RunAsNonRoot), isTrue(sc.AllowPrivilegeEscalation))
	}
	if sc.Capabilities == nil || !cmp.Equal(sc.Capabilities.Drop, []string{"ALL"}) {
		t.Errorf("%s: capabilities not all dropped", what)
	}
}

func checkService(t *testing.T, b built, svc service, d deployment) {
	t.Helper()
	s, ok := b.services[svc.Name]
	if !ok {
		t.Error("no Service")
		return
	}
	if diff := cmp.Diff(d.Spec.Selector.MatchLabels, s.Spec.Selector); diff != "" {
		t.Errorf("Service selector mismatch (-deployment +service):\n%s", diff)
	}
	if len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != svc.Port || s.Spec.Ports[0].TargetPort != "http" {
		t.Errorf("Service ports = %+v, want %d -> http", s.Spec.Ports, svc.Port)
	}
}

func checkPDB(t *testing.T, b built, svc service, d deployment) {
	t.Helper()
	p, ok := b.pdbs[svc.Name]
	if !ok {
		t.Error("no PodDisruptionBudget")
		return
	}
	if p.APIVersion != "policy/v1" {
		t.Errorf("PodDisruptionBudget apiVersion %s", p.APIVersion)
	}
	if diff := cmp.Diff(d.Spec.Selector.MatchLabels, p.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("PodDisruptionBudget selector mismatch (-deployment +pdb):\n%s", diff)
	}
	// minAvailable with one replica would block every node drain.
	if p.Spec.MinAvailable != nil || p.Spec.MaxUnavailable == nil {
		t.Errorf("PodDisruptionBudget: minAvailable %v, maxUnavailable %v; want maxUnavailable only", p.Spec.MinAvailable, p.Spec.MaxUnavailable)
	}
}

func checkHPA(t *testing.T, b built, ov overlay, svc service) {
	t.Helper()
	h, ok := b.hpas[svc.Name]
	if ov.minReplicas == 0 {
		if ok {
			t.Error("HorizontalPodAutoscaler in an overlay with fixed replicas")
		}
		return
	}
	if !ok {
		t.Error("no HorizontalPodAutoscaler")
		return
	}
	if h.APIVersion != "autoscaling/v2" {
		t.Errorf("HPA apiVersion %s, want autoscaling/v2", h.APIVersion)
	}
	ref := h.Spec.ScaleTargetRef
	if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Name != svc.Name {
		t.Errorf("HPA targets %+v", ref)
	}
	if got := deref(h.Spec.MinReplicas); got != ov.minReplicas {
		t.Errorf("HPA minReplicas = %d, want %d", got, ov.minReplicas)
	}
	if h.Spec.MaxReplicas < deref(h.Spec.MinReplicas) {
		t.Errorf("HPA maxReplicas %d < minReplicas %d", h.Spec.MaxReplicas, deref(h.Spec.MinReplicas))
	}
	// A consumer group has at most one active member per partition.
	if svc.Name != "transfers" && h.Spec.MaxReplicas > partitions {
		t.Errorf("HPA maxReplicas %d > %d partitions: the extra consumers would sit idle", h.Spec.MaxReplicas, partitions)
	}
	if len(h.Spec.Metrics) == 0 {
		t.Error("HPA without metrics")
	}
}

func checkTopicsJob(t *testing.T, b built, ov overlay) {
	t.Helper()
	j, ok := b.jobs["payments-topics"]
	if !ok {
		t.Errorf("no topics Job; jobs: %v", sortedKeys(b.jobs))
		return
	}
	spec := j.Spec.Template.Spec
	if spec.RestartPolicy != "Never" && spec.RestartPolicy != "OnFailure" {
		t.Errorf("Job restartPolicy %q", spec.RestartPolicy)
	}
	if sc := spec.SecurityContext; sc == nil || !isTrue(sc.RunAsNonRoot) {
		t.Error("topics Job may run as root")
	}
	if len(spec.Containers) != 1 {
		t.Fatalf("topics Job: %d containers", len(spec.Containers))
	}
	c := spec.Containers[0]
	if c.Image != ov.image {
		t.Errorf("topics Job image = %q, want %q", c.Image, ov.image)
	}
	got := append(append([]string(nil), c.Command...), c.Args...)
	want := []string{suiteBinary, "topics", "create", "--replication-factor", strconv.Itoa(ov.topicsRF)}
	if ov.kafkaSecured {
		want = append(want, "--acls")
	}
	checkKafkaSecurity(t, b, ov, spec, c, "payments-admin", "payments-kafka-admin")
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("topics Job command mismatch (-want +got):\n%s", diff)
	}
	if containerEnv(t, b, c)["KAFKA_BROKERS"] == "" {
		t.Error("topics Job: KAFKA_BROKERS is not set")
	}
	checkResources(t, "topics Job", c)
	checkContainerSecurity(t, "topics Job", c)
}

// secret.example.yaml shows every Secret key that a Deployment of any
// overlay reads (it is what an operator copies), and no overlay renders it.
func TestSecretExample(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(repo.Path(t), "deploy", "k8s", "base", "secret.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	example := map[string]bool{} // "secret/key"
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var s struct {
			object
			StringData map[string]string `json:"stringData"`
		}
		if err := yaml.Unmarshal([]byte(doc), &s); err != nil {
			t.Fatal(err)
		}
		if s.Kind != "Secret" {
			t.Errorf("secret.example.yaml holds a %q", s.Kind)
		}
		for k, v := range s.StringData {
			example[s.Metadata.Name+"/"+k] = true
			if !strings.Contains(v, "CHANGE-ME") {
				t.Errorf("secret.example.yaml: %s/%s is not a placeholder", s.Metadata.Name, k)
			}
		}
	}
	for _, ov := range overlays {
		b := kustomizeBuild(t, ov.dir)
		pods := map[string]podSpec{}
		for name, d := range b.deployments {
			pods["Deployment "+name] = d.Spec.Template.Spec
		}
		for name, j := range b.jobs {
			pods["Job "+name] = j.Spec.Template.Spec
		}
		for name, spec := range pods {
			for _, v := range spec.Volumes {
				if v.Secret == nil {
					continue
				}
				key, ok := map[string]string{"kafka-ca": "ca.crt",
					"transfers-authorization-key": transfersig.KeyFile, "ledger-authorization-jwks": transfersig.JWKSFile}[v.Secret.SecretName]
				if !ok {
					key = "password"
				}
				// The key that signs debits is the transfers pods' alone.
				if v.Secret.SecretName == "transfers-authorization-key" && name != "Deployment transfers" {
					t.Errorf("%s: %s mounts the transfers service's authorization key", ov.dir, name)
				}
				if !example[v.Secret.SecretName+"/"+key] {
					t.Errorf("%s: %s mounts Secret %s, missing from secret.example.yaml with key %s", ov.dir, name, v.Secret.SecretName, key)
				}
			}
			for _, c := range append(append([]container(nil), spec.InitContainers...), spec.Containers...) {
				for _, e := range c.Env {
					if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
						continue
					}
					ref := e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
					if !example[ref] {
						t.Errorf("%s: %s reads %s, missing from secret.example.yaml", ov.dir, name, ref)
					}
				}
			}
		}
	}
}

func deref(p *int) int {
	if p == nil {
		return 0
	}
	return *p
}

func isTrue(p *bool) bool { return p != nil && *p }

// checkAuthEnv: the manifests take the identity provider's JWKS URL,
// issuer and audience from configuration and ship no key (no
// AUTH_JWKS_FILE); production fetches the JWKS over https from a real
// provider, not the base's placeholder.
func checkAuthEnv(t *testing.T, name, overlay string, envs map[string]string) {
	t.Helper()
	if envs["AUTH_JWKS_FILE"] != "" {
		t.Errorf("%s: AUTH_JWKS_FILE = %q: the manifests ship no key, they name the provider's JWKS URL", name, envs["AUTH_JWKS_FILE"])
	}
	u, err := url.Parse(envs["AUTH_JWKS_URL"])
	if err != nil || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
		t.Errorf("%s: AUTH_JWKS_URL = %q, want the provider's JWKS URL", name, envs["AUTH_JWKS_URL"])
	}
	if envs["AUTH_ISSUER"] == "" || envs["AUTH_AUDIENCE"] == "" {
		t.Errorf("%s: AUTH_ISSUER %q, AUTH_AUDIENCE %q: both must be set", name, envs["AUTH_ISSUER"], envs["AUTH_AUDIENCE"])
	}
	if overlay == "overlays/prod" && (u == nil || u.Scheme != "https" || strings.HasSuffix(u.Hostname(), ".invalid")) {
		t.Errorf("%s: production AUTH_JWKS_URL = %q, want the real provider over https", name, envs["AUTH_JWKS_URL"])
	}
	// Plain http only where the development switch allows it, and the
	// switch only in the development overlay.
	if dev := overlay == "overlays/dev"; (envs["DEV_INSECURE_HTTP"] == "true") != dev || (!dev && envs["DEV_INSECURE_HTTP"] != "") {
		t.Errorf("%s: DEV_INSECURE_HTTP = %q, want true in the development overlay only", name, envs["DEV_INSECURE_HTTP"])
	}
	if u != nil && u.Scheme == "http" && envs["DEV_INSECURE_HTTP"] != "true" {
		t.Errorf("%s: AUTH_JWKS_URL %q is plain http without DEV_INSECURE_HTTP: the service would not start", name, envs["AUTH_JWKS_URL"])
	}
}
