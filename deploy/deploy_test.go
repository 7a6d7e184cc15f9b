// Package deploy_test validates the deployment files in deploy/: the
// Compose stack, the Kubernetes manifests, the Keycloak realm, the
// Prometheus configuration and alert rules, and the Grafana dashboard. None
// of them runs here (there is no container engine in CI); each is loaded
// with the parser of the tool that will read it, where one exists in Go, and
// checked for what a deployment needs to work: names, ports, start order,
// files, and metric names that the running programs really export
// (metrics_test.go).
package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	yaml "go.yaml.in/yaml/v3"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/internal/testenv"
)

// The services of compose.yaml, and what the tests expect of them.
const (
	entryPoint = "lb"
	edgeImage  = "orgedge/edge"
	realmName  = "orgedge"
	audience   = "api"
)

var (
	edgeReplicas     = []string{"edge-1", "edge-2"}
	composeServices  = []string{"redis", "postgres", "keycloak", "orgsvc", "edge-1", "edge-2", entryPoint, "prometheus", "grafana", "otel-collector", "jaeger", "redis-exporter", "alertmanager"}
	builtFromSources = map[string]string{"edge-1": "deploy/edge.Dockerfile", "edge-2": "deploy/edge.Dockerfile", "orgsvc": "deploy/orgsvc.Dockerfile"}
	serviceRoles     = []string{"svc-admin", "svc-env-manager", "svc-viewer"}
)

// loadCompose loads compose.yaml as `docker compose` would, from deploy/,
// with the variables' defaults (not the developer's environment).
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{"compose.yaml"},
		cli.WithWorkingDirectory("."),
		cli.WithEnv(nil),
		cli.WithName("orgedge"),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := opts.LoadProject(ctx)
	if err != nil {
		t.Fatalf("load compose.yaml: %v", err)
	}
	return p
}

func service(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, ok := p.Services[name]
	if !ok {
		t.Fatalf("compose.yaml has no service %q", name)
	}
	return s
}

// env returns a service's environment as a getenv function.
func env(s types.ServiceConfig) func(string) string {
	return func(name string) string {
		if v := s.Environment[name]; v != nil {
			return *v
		}
		return ""
	}
}

func TestComposeHasEveryServiceWithImageAndHealthCheck(t *testing.T) {
	p := loadCompose(t)
	for _, name := range composeServices {
		s := service(t, p, name)
		if s.Image == "" && s.Build == nil {
			t.Errorf("%s: neither image nor build", name)
		}
		if s.HealthCheck == nil || s.HealthCheck.Disable || len(s.HealthCheck.Test) == 0 || s.HealthCheck.Test[0] == "NONE" {
			t.Errorf("%s: no health check", name)
		}
	}
	for name := range p.Services {
		if !slices.Contains(composeServices, name) {
			t.Errorf("compose.yaml has service %q that this test does not know: add it to composeServices", name)
		}
	}
}

func TestComposeBuildsEdgeAndBackendFromTheirDockerfiles(t *testing.T) {
	p := loadCompose(t)
	root, _ := filepath.Abs("..")
	for name, dockerfile := range builtFromSources {
		s := service(t, p, name)
		if s.Build == nil {
			t.Errorf("%s: no build", name)
			continue
		}
		if s.Image == "" {
			t.Errorf("%s: builds but names no image", name)
		}
		if s.Build.Context != root {
			t.Errorf("%s: build context %s, want the repository root %s", name, s.Build.Context, root)
		}
		if got := filepath.ToSlash(s.Build.Dockerfile); got != dockerfile {
			t.Errorf("%s: dockerfile %q, want %q", name, got, dockerfile)
		}
	}
	if a, b := service(t, p, "edge-1").Image, service(t, p, "edge-2").Image; a != b || imageRepo(a) != edgeImage {
		t.Errorf("edge replicas run images %q and %q, want one %s image", a, b, edgeImage)
	}
	// Every build's Dockerfile exists, and the Go images are static and non-root.
	for name, s := range p.Services {
		if s.Build == nil {
			continue
		}
		df := s.Build.Dockerfile
		if df == "" {
			df = "Dockerfile"
		}
		data, err := os.ReadFile(filepath.Join(s.Build.Context, df))
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if _, ok := builtFromSources[name]; ok {
			checkGoDockerfile(t, name, string(data))
		}
	}
}

// checkGoDockerfile checks what the brief of the images asks: a Go
// builder, a static trimmed build, a non-root distroless final stage with a
// health check the binary answers itself.
func checkGoDockerfile(t *testing.T, name, df string) {
	t.Helper()
	for _, want := range []string{
		"FROM golang:${GO_VERSION} AS build", "ARG GO_VERSION=1.26",
		"CGO_ENABLED=0", "-trimpath", `-ldflags="-s -w -X main.buildVersion=${VERSION}"`, "ARG VERSION=",
		"FROM gcr.io/distroless/static-debian12:nonroot", "USER 65532:65532",
		"EXPOSE ", "ENTRYPOINT [", "HEALTHCHECK ", `"-healthcheck"`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("%s's Dockerfile lacks %q", name, want)
		}
	}
}

func imageRepo(image string) string {
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		return image[:i]
	}
	return image
}

func TestComposeStartsEachServiceAfterWhatItNeedsIsHealthy(t *testing.T) {
	p := loadCompose(t)
	needs := map[string][]string{
		"orgsvc":   {"postgres", "keycloak"},
		entryPoint: edgeReplicas,
		"grafana":  {"prometheus"},
	}
	for _, e := range edgeReplicas {
		needs[e] = []string{"redis", "orgsvc", "keycloak"}
	}
	for name, deps := range needs {
		s := service(t, p, name)
		for _, dep := range deps {
			d, ok := s.DependsOn[dep]
			switch {
			case !ok:
				t.Errorf("%s does not depend on %s", name, dep)
			case d.Condition != types.ServiceConditionHealthy:
				t.Errorf("%s depends on %s with condition %q, want %q", name, dep, d.Condition, types.ServiceConditionHealthy)
			}
		}
	}
	// A start order exists: every dependency is a service, and there is no cycle.
	order := startOrder(t, p)
	t.Logf("start order: %s", strings.Join(order, ", "))
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	for name, deps := range needs {
		for _, dep := range deps {
			if pos[dep] > pos[name] {
				t.Errorf("%s starts before %s", name, dep)
			}
		}
	}
}

// startOrder sorts the services so that each comes after its dependencies.
func startOrder(t *testing.T, p *types.Project) []string {
	t.Helper()
	var (
		order []string
		state = map[string]int{} // 1 visiting, 2 done
		visit func(string, []string)
	)
	visit = func(n string, path []string) {
		switch state[n] {
		case 1:
			t.Fatalf("depends_on cycle: %s -> %s", strings.Join(path, " -> "), n)
		case 2:
			return
		}
		s, ok := p.Services[n]
		if !ok {
			t.Fatalf("%s depends on %s, which is no service", path[len(path)-1], n)
		}
		state[n] = 1
		deps := make([]string, 0, len(s.DependsOn))
		for d := range s.DependsOn {
			deps = append(deps, d)
		}
		sort.Strings(deps)
		for _, d := range deps {
			visit(d, append(path, n))
		}
		state[n] = 2
		order = append(order, n)
	}
	names := make([]string, 0, len(p.Services))
	for n := range p.Services {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		visit(n, nil)
	}
	return order
}

func TestComposeMountsFilesThatExist(t *testing.T) {
	p := loadCompose(t)
	root, _ := filepath.Abs("..")
	binds := 0
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type != types.VolumeTypeBind {
				continue
			}
			binds++
			if !strings.HasPrefix(v.Source, root+string(filepath.Separator)) {
				t.Errorf("%s mounts %s, outside the repository", name, v.Source)
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s mounts a file that does not exist: %v", name, err)
			}
			if !v.ReadOnly {
				t.Errorf("%s mounts %s writable; configuration is mounted read-only", name, v.Source)
			}
		}
	}
	if binds == 0 {
		t.Fatal("no bind mounts found")
	}
}

// mountSource returns the host file a service mounts at target.
func mountSource(t *testing.T, s types.ServiceConfig, target string) string {
	t.Helper()
	for _, v := range s.Volumes {
		if v.Target == target {
			return v.Source
		}
	}
	t.Fatalf("%s mounts nothing at %s", s.Name, target)
	return ""
}

// TestComposeEdgeConfigurationIsValid runs each replica's configuration
// (the mounted file and its EDGE_* variables) through the edge's own loader
// and validation, and checks that every address names a service of the
// stack on the right port.
func TestComposeEdgeConfigurationIsValid(t *testing.T) {
	p := loadCompose(t)
	for _, name := range edgeReplicas {
		s := service(t, p, name)
		args := []string(s.Command)
		i := slices.Index(args, "-config")
		if i < 0 || i+1 >= len(args) {
			t.Fatalf("%s: command %q has no -config FILE", name, args)
		}
		data, err := os.ReadFile(mountSource(t, s, args[i+1]))
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := config.LoadData(args[i+1], data, env(s))
		if err != nil {
			t.Fatalf("%s: configuration: %v", name, err)
		}

		apiPort, adminPort := port(t, cfg.Listen.Addr), port(t, cfg.Admin.Addr)
		if apiPort != "8080" || adminPort != "9090" {
			t.Errorf("%s listens on %s, admin %s; want :8080 and :9090", name, cfg.Listen.Addr, cfg.Admin.Addr)
		}
		if host, _, _ := net.SplitHostPort(cfg.Listen.Addr); host != "" && host != "0.0.0.0" {
			t.Errorf("%s listens on %s: unreachable from other containers", name, cfg.Listen.Addr)
		}
		wantHealth := []string{"CMD", "/edge", "-healthcheck", "http://127.0.0.1:" + adminPort + "/readyz"}
		if !slices.Equal([]string(s.HealthCheck.Test), wantHealth) {
			t.Errorf("%s health check %q, want %q", name, s.HealthCheck.Test, wantHealth)
		}
		checkServiceURL(t, p, name+" upstream.url", cfg.Upstream.URL, "orgsvc", "8082")
		checkServiceURL(t, p, name+" oidc.issuer_url", cfg.OIDC.IssuerURL, "keycloak", "8081")
		if path := mustURL(t, cfg.OIDC.IssuerURL).Path; path != "/realms/"+realmName {
			t.Errorf("%s: issuer path %s, want /realms/%s (deploy/keycloak/realm.json)", name, path, realmName)
		}
		if cfg.OIDC.Audience != audience {
			t.Errorf("%s: oidc.audience %q, want %q (the realm's audience mapper)", name, cfg.OIDC.Audience, audience)
		}
		if cfg.Redis.Addr != "redis:6379" || len(cfg.Redis.ClusterAddrs) != 0 {
			t.Errorf("%s: redis %q %q, want redis:6379", name, cfg.Redis.Addr, cfg.Redis.ClusterAddrs)
		}
		redisPass := ""
		for i, a := range service(t, p, "redis").Command {
			if a == "--requirepass" && i+1 < len(service(t, p, "redis").Command) {
				redisPass = service(t, p, "redis").Command[i+1]
			}
		}
		if cfg.Redis.Password == "" || cfg.Redis.Password != redisPass {
			t.Errorf("%s: EDGE_REDIS_PASSWORD does not match redis' --requirepass", name)
		}
		checkOTLP(t, p, name, env(s))
		if grace := time.Duration(*s.StopGracePeriod); grace <= cfg.Listen.ShutdownGrace {
			t.Errorf("%s: stop_grace_period %s is not above listen.shutdown_grace %s", name, grace, cfg.Listen.ShutdownGrace)
		}
	}
}

func TestComposeBackendConfiguration(t *testing.T) {
	p := loadCompose(t)
	s := service(t, p, "orgsvc")
	get := env(s)
	if port(t, get("ORGSVC_ADDR")) != "8082" {
		t.Errorf("ORGSVC_ADDR %q, want :8082", get("ORGSVC_ADDR"))
	}
	admin := port(t, get("ORGSVC_ADMIN_ADDR"))
	if admin != "9092" {
		t.Errorf("ORGSVC_ADMIN_ADDR %q, want :9092", get("ORGSVC_ADMIN_ADDR"))
	}
	wantHealth := []string{"CMD", "/orgsvc", "-healthcheck", "http://127.0.0.1:" + admin + "/readyz"}
	if !slices.Equal([]string(s.HealthCheck.Test), wantHealth) {
		t.Errorf("orgsvc health check %q, want %q", s.HealthCheck.Test, wantHealth)
	}
	edge := config.Default()
	edge.ApplyEnv(env(service(t, p, "edge-1")))
	if get("ORGSVC_ISSUER_URL") != edge.OIDC.IssuerURL {
		t.Errorf("ORGSVC_ISSUER_URL %q, the edge's issuer %q: both must verify the same tokens", get("ORGSVC_ISSUER_URL"), edge.OIDC.IssuerURL)
	}
	if get("ORGSVC_AUDIENCE") != audience {
		t.Errorf("ORGSVC_AUDIENCE %q, want %q", get("ORGSVC_AUDIENCE"), audience)
	}
	if rc := get("ORGSVC_ROLE_CLAIMS"); rc != "" && rc != strings.Join(edge.OIDC.RoleClaims, ",") {
		t.Errorf("ORGSVC_ROLE_CLAIMS %q, the edge's oidc.role_claims %q", rc, edge.OIDC.RoleClaims)
	}
	checkOTLP(t, p, "orgsvc", get)
	dsn := mustURL(t, get("ORGSVC_DATABASE"))
	pg := env(service(t, p, "postgres"))
	pass, _ := dsn.User.Password()
	if dsn.Scheme != "postgres" || dsn.Hostname() != "postgres" || dsn.User.Username() != pg("POSTGRES_USER") ||
		pass != pg("POSTGRES_PASSWORD") || strings.TrimPrefix(dsn.Path, "/") != pg("POSTGRES_DB") {
		t.Errorf("ORGSVC_DATABASE %s does not match the postgres service (user %s, db %s)", dsn.Redacted(), pg("POSTGRES_USER"), pg("POSTGRES_DB"))
	}
}

func TestComposeEntryPointBalancesBothReplicas(t *testing.T) {
	p := loadCompose(t)
	lb := service(t, p, entryPoint)
	published := false
	for _, pc := range lb.Ports {
		published = published || (pc.Target == 8080 && pc.Published == "8080")
	}
	if !published {
		t.Errorf("%s does not publish 8080", entryPoint)
	}
	for name, s := range p.Services {
		if name != entryPoint && slices.Contains(edgeReplicas, name) && len(s.Ports) > 0 {
			t.Errorf("%s publishes ports: clients must come through %s", name, entryPoint)
		}
	}
	data, err := os.ReadFile(mountSource(t, lb, "/etc/nginx/nginx.conf"))
	if err != nil {
		t.Fatal(err)
	}
	conf := string(data)
	stream := regexp.MustCompile(`(?s)stream\s*\{.*upstream\s+edge_api\s*\{(.*?)\}`).FindStringSubmatch(conf)
	if stream == nil {
		t.Fatal("nginx.conf: no stream { upstream edge_api { ... } }: gRPC needs h2c carried as is")
	}
	for _, e := range edgeReplicas {
		if !regexp.MustCompile(`server\s+` + regexp.QuoteMeta(e) + `:8080\b`).MatchString(stream[1]) {
			t.Errorf("nginx.conf: upstream edge_api lacks %s:8080", e)
		}
	}
	if !regexp.MustCompile(`listen\s+8080;`).MatchString(conf) {
		t.Error("nginx.conf does not listen on 8080")
	}
	if !strings.Contains(conf, "listen 8099;") || !strings.Contains(strings.Join(lb.HealthCheck.Test, " "), ":8099/healthz") {
		t.Error("the entry point's health check does not ask its own /healthz on 8099")
	}
}

func TestComposeObservabilityIsWired(t *testing.T) {
	p := loadCompose(t)

	// Prometheus scrapes every replica's and the backend's admin port, and itself.
	prom := service(t, p, "prometheus")
	var pc struct {
		RuleFiles     []string `yaml:"rule_files"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, mountSource(t, prom, "/etc/prometheus/prometheus.yml"), &pc)
	targets := map[string][]string{}
	for _, sc := range pc.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			targets[sc.JobName] = append(targets[sc.JobName], st.Targets...)
		}
	}
	wantTargets := map[string][]string{"edge": {"edge-1:9090", "edge-2:9090"}, "orgsvc": {"orgsvc:9092"}, "prometheus": {"localhost:9090"}}
	for job, want := range wantTargets {
		got := slices.Clone(targets[job])
		sort.Strings(got)
		if !slices.Equal(got, want) {
			t.Errorf("prometheus job %s scrapes %q, want %q", job, got, want)
		}
	}
	for _, rf := range pc.RuleFiles {
		mountSource(t, prom, filepath.Join("/etc/prometheus", rf)) // the rule file is mounted next to the config
	}
	if len(pc.RuleFiles) == 0 {
		t.Error("prometheus.yml loads no rule files")
	}

	// Grafana: the datasource points at the prometheus service, the
	// dashboards folder is mounted where the provider reads it.
	graf := service(t, p, "grafana")
	var ds struct {
		Datasources []struct {
			UID, Type, URL string
		} `yaml:"datasources"`
	}
	provisioning := mountSource(t, graf, "/etc/grafana/provisioning")
	readYAML(t, filepath.Join(provisioning, "datasources", "prometheus.yaml"), &ds)
	found := false
	for _, d := range ds.Datasources {
		if d.Type == "prometheus" {
			found = true
			checkServiceURL(t, p, "grafana datasource "+d.UID, d.URL, "prometheus", "9090")
		}
	}
	if !found {
		t.Error("grafana has no prometheus datasource")
	}
	var prov struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, filepath.Join(provisioning, "dashboards", "orgedge.yaml"), &prov)
	if len(prov.Providers) != 1 {
		t.Fatalf("want one dashboard provider, got %d", len(prov.Providers))
	}
	dir := mountSource(t, graf, prov.Providers[0].Options.Path)
	if _, err := os.Stat(filepath.Join(dir, "orgedge.json")); err != nil {
		t.Errorf("the dashboard provider's folder lacks the dashboard: %v", err)
	}

	// The collector receives OTLP on 4317 and exports to jaeger; every
	// pipeline names components that are defined.
	col := service(t, p, "otel-collector")
	var oc struct {
		Extensions map[string]any `yaml:"extensions"`
		Receivers  map[string]any `yaml:"receivers"`
		Processors map[string]any `yaml:"processors"`
		Exporters  map[string]struct {
			Endpoint string `yaml:"endpoint"`
		} `yaml:"exporters"`
		Service struct {
			Extensions []string `yaml:"extensions"`
			Pipelines  map[string]struct {
				Receivers, Processors, Exporters []string
			} `yaml:"pipelines"`
		} `yaml:"service"`
	}
	readYAML(t, mountSource(t, col, "/etc/otelcol-contrib/config.yaml"), &oc)
	if _, ok := oc.Service.Pipelines["traces"]; !ok {
		t.Error("the collector has no traces pipeline")
	}
	for name, pl := range oc.Service.Pipelines {
		for kind, ids := range map[string][]string{"receiver": pl.Receivers, "processor": pl.Processors} {
			defined := oc.Receivers
			if kind == "processor" {
				defined = oc.Processors
			}
			for _, id := range ids {
				if _, ok := defined[id]; !ok {
					t.Errorf("collector pipeline %s names undefined %s %s", name, kind, id)
				}
			}
		}
		for _, id := range pl.Exporters {
			e, ok := oc.Exporters[id]
			if !ok {
				t.Errorf("collector pipeline %s names undefined exporter %s", name, id)
				continue
			}
			host, _, err := net.SplitHostPort(e.Endpoint)
			if err != nil || host != "jaeger" {
				t.Errorf("collector exporter %s sends to %q, want jaeger:4317", id, e.Endpoint)
			}
		}
	}
	for _, id := range oc.Service.Extensions {
		if _, ok := oc.Extensions[id]; !ok {
			t.Errorf("collector names undefined extension %s", id)
		}
	}
	if !strings.Contains(strings.Join(col.HealthCheck.Test, " "), ":13133") {
		t.Error("the collector's health check does not ask its health_check extension (:13133)")
	}
}

// checkOTLP checks that a service sends traces to the collector, over OTLP
// gRPC on 4317 (the SDK's default protocol is http/protobuf, on 4318).
func checkOTLP(t *testing.T, p *types.Project, name string, get func(string) string) {
	t.Helper()
	checkServiceURL(t, p, name+" OTEL_EXPORTER_OTLP_ENDPOINT", get("OTEL_EXPORTER_OTLP_ENDPOINT"), "otel-collector", "4317")
	if get("OTEL_EXPORTER_OTLP_PROTOCOL") != "grpc" {
		t.Errorf("%s: OTEL_EXPORTER_OTLP_PROTOCOL %q, want grpc for port 4317", name, get("OTEL_EXPORTER_OTLP_PROTOCOL"))
	}
	if get("OTEL_SERVICE_NAME") != name && !strings.HasPrefix(name, get("OTEL_SERVICE_NAME")+"-") {
		t.Errorf("%s: OTEL_SERVICE_NAME %q", name, get("OTEL_SERVICE_NAME"))
	}
}

// checkServiceURL checks that raw is http://<service>:<port>.
func checkServiceURL(t *testing.T, p *types.Project, what, raw, svc, wantPort string) {
	t.Helper()
	u := mustURL(t, raw)
	if _, ok := p.Services[u.Hostname()]; !ok || u.Hostname() != svc || u.Port() != wantPort || u.Scheme != "http" {
		t.Errorf("%s is %q, want http://%s:%s", what, raw, svc, wantPort)
	}
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%q: %v", raw, err)
	}
	return u
}

func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("address %q: %v", addr, err)
	}
	return p
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// promtool returns the path of promtool, skipping the test without it
// (failing it under CI=true, where scripts/test installs it).
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		if testenv.InCI() {
			t.Fatal("promtool is required under CI=true (scripts/test installs the Debian package prometheus)")
		}
		t.Skip("no promtool on PATH: apt-get install prometheus, or run scripts/test")
	}
	return path
}

func TestPromtoolAcceptsConfigRulesAndRuleTests(t *testing.T) {
	t.Parallel()
	bin := promtool(t)
	for _, args := range [][]string{
		{"check", "config", "prometheus.yml"},
		{"check", "rules", "alerts.yml"},
		// Unit tests of the alerts: they fire on what they are about, and
		// not on client refusals.
		{"test", "rules", "alerts_test.yml"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// alertRules reads deploy/prometheus/alerts.yml.
type alertRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func alertRules(t *testing.T) []alertRule {
	t.Helper()
	var f struct {
		Groups []struct {
			Name  string      `yaml:"name"`
			Rules []alertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	readYAML(t, "prometheus/alerts.yml", &f)
	var rules []alertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("alerts.yml holds no rules")
	}
	return rules
}

func TestAlertsSayHowBadAndWhat(t *testing.T) {
	rules := alertRules(t)
	names := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		names[r.Alert] = true
		if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
			t.Errorf("%s: for %q, want a duration, so that a blip does not page", r.Alert, r.For)
		}
		if s := r.Labels["severity"]; s != "critical" && s != "warning" {
			t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: needs annotations summary and description", r.Alert)
		}
	}
	// What the on-call SRE must hear about.
	for _, want := range []string{
		"EdgeHighErrorRatio", "EdgeHighLatencyP99", "EdgeRedisBreakerOpen", "EdgeFailOpenActive",
		"EdgeReplicaDown", "EdgeTooFewReplicas", "BackendDown", "BackendHighErrorRatio",
	} {
		if !names[want] {
			t.Errorf("alerts.yml lacks %s", want)
		}
	}
	// docs/operations.md explains each alert.
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	for name := range names {
		if !bytes.Contains(doc, []byte("`"+name+"`")) {
			t.Errorf("docs/operations.md does not explain %s", name)
		}
	}
}

// realm is the part of Keycloak's realm representation the edge relies on.
type realm struct {
	Realm string `json:"realm"`
	Roles struct {
		Realm []struct {
			Name string `json:"name"`
		} `json:"realm"`
	} `json:"roles"`
	Clients []realmClient `json:"clients"`
	Users   []struct {
		Username             string              `json:"username"`
		Enabled              bool                `json:"enabled"`
		ServiceAccountClient string              `json:"serviceAccountClientId"`
		RealmRoles           []string            `json:"realmRoles"`
		Attributes           map[string][]string `json:"attributes"`
		Email                string              `json:"email"`
		EmailVerified        bool                `json:"emailVerified"`
		FirstName, LastName  string
		Credentials          []struct{ Type, Value string }
	} `json:"users"`
	Components map[string][]struct {
		ProviderID string              `json:"providerId"`
		Config     map[string][]string `json:"config"`
	} `json:"components"`
}

type realmClient struct {
	ClientID                  string            `json:"clientId"`
	Enabled                   bool              `json:"enabled"`
	PublicClient              bool              `json:"publicClient"`
	Secret                    string            `json:"secret"`
	ServiceAccountsEnabled    bool              `json:"serviceAccountsEnabled"`
	DirectAccessGrantsEnabled bool              `json:"directAccessGrantsEnabled"`
	BearerOnly                bool              `json:"bearerOnly"`
	Attributes                map[string]string `json:"attributes"`
	ProtocolMappers           []struct {
		Name           string            `json:"name"`
		Protocol       string            `json:"protocol"`
		ProtocolMapper string            `json:"protocolMapper"`
		Config         map[string]string `json:"config"`
	} `json:"protocolMappers"`
}

// hasMapper reports whether the client has a mapper of that type whose
// config holds every key and value of want.
func (c realmClient) hasMapper(typ string, want map[string]string) bool {
	for _, m := range c.ProtocolMappers {
		if m.ProtocolMapper != typ || m.Protocol != "openid-connect" {
			continue
		}
		ok := true
		for k, v := range want {
			ok = ok && m.Config[k] == v
		}
		if ok {
			return true
		}
	}
	return false
}

func TestKeycloakRealmOffersWhatTheEdgeNeeds(t *testing.T) {
	data, err := os.ReadFile("keycloak/realm.json")
	if err != nil {
		t.Fatal(err)
	}
	var r realm
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("realm.json: %v", err)
	}
	if r.Realm != realmName {
		t.Errorf("realm %q, want %q", r.Realm, realmName)
	}
	roles := map[string]bool{}
	for _, role := range r.Roles.Realm {
		roles[role.Name] = true
	}
	clients := map[string]realmClient{}
	for _, c := range r.Clients {
		clients[c.ClientID] = c
	}
	planMapper := map[string]string{"user.attribute": "plan", "claim.name": "plan", "access.token.claim": "true"}
	audienceMapper := map[string]string{"included.custom.audience": audience, "access.token.claim": "true"}

	for _, role := range serviceRoles {
		if !roles[role] {
			t.Errorf("realm role %s missing", role)
		}
		c, ok := clients[role]
		switch {
		case !ok:
			t.Errorf("no client %s", role)
			continue
		case !c.Enabled || c.PublicClient || c.Secret == "" || !c.ServiceAccountsEnabled:
			t.Errorf("client %s must be an enabled confidential client with a secret and serviceAccountsEnabled", role)
		}
		if !c.hasMapper("oidc-audience-mapper", audienceMapper) {
			t.Errorf("client %s: tokens would not carry aud %q", role, audience)
		}
		if !c.hasMapper("oidc-usermodel-attribute-mapper", planMapper) {
			t.Errorf("client %s: no plan attribute mapper into the access token", role)
		}
		found := false
		for _, u := range r.Users {
			if u.Username == "service-account-"+role {
				found = true
				if u.ServiceAccountClient != role || !slices.Contains(u.RealmRoles, role) || !u.Enabled {
					t.Errorf("service account user of %s: client %q roles %q; want client %s with realm role %s", role, u.ServiceAccountClient, u.RealmRoles, role, role)
				}
			}
		}
		if !found {
			t.Errorf("no service account user service-account-%s", role)
		}
	}

	// The audience is the API's own client: defined, so that no one else
	// can take its name (and with it resource_access.<audience>.roles, where
	// the edge and the backend read client roles), and signing no one in.
	if api, ok := clients[audience]; !ok {
		t.Errorf("no client %s: define the API's own client, so that its name is taken", audience)
	} else if api.PublicClient || api.ServiceAccountsEnabled || api.DirectAccessGrantsEnabled || !api.BearerOnly {
		t.Errorf("client %s must be bearer-only: it gets no tokens", audience)
	}

	cli, ok := clients["cli"]
	if !ok {
		t.Fatal("no client cli")
	}
	if !cli.PublicClient || !cli.Enabled || cli.Secret != "" {
		t.Error("client cli must be public and enabled, without a secret")
	}
	if cli.Attributes["oauth2.device.authorization.grant.enabled"] != "true" {
		t.Error("client cli: device authorization grant not enabled")
	}
	if !cli.DirectAccessGrantsEnabled {
		t.Error("client cli: direct access grants (password) not enabled")
	}
	if !cli.hasMapper("oidc-audience-mapper", audienceMapper) || !cli.hasMapper("oidc-usermodel-attribute-mapper", planMapper) {
		t.Error("client cli lacks the audience or plan mapper")
	}

	// People on each plan, complete enough for Keycloak's user profile
	// (a user missing required attributes cannot use the password grant).
	plans := map[string]bool{}
	for _, u := range r.Users {
		if u.ServiceAccountClient != "" {
			continue
		}
		if len(u.Attributes["plan"]) != 1 {
			t.Errorf("user %s: want one plan attribute, got %q", u.Username, u.Attributes["plan"])
			continue
		}
		plans[u.Attributes["plan"][0]] = true
		if !u.Enabled || u.Email == "" || !u.EmailVerified || u.FirstName == "" || u.LastName == "" || len(u.Credentials) == 0 {
			t.Errorf("user %s: want enabled, a verified email, first and last name and a password", u.Username)
		}
		if slices.ContainsFunc(u.RealmRoles, func(role string) bool { return strings.HasPrefix(role, "svc-") }) {
			t.Errorf("user %s holds a service-account role", u.Username)
		}
	}
	for _, p := range []string{"free", "pro", "enterprise"} {
		if !plans[p] {
			t.Errorf("no example user on plan %s", p)
		}
		if _, ok := config.Default().Limits.Plans[p]; !ok {
			t.Errorf("plan %s is not a plan of the edge", p)
		}
	}

	// The user profile declares plan, editable by admins only: a person
	// must not raise their own plan in the account console.
	var profile struct {
		UnmanagedAttributePolicy string `json:"unmanagedAttributePolicy"`
		Attributes               []struct {
			Name        string `json:"name"`
			Permissions struct {
				Edit []string `json:"edit"`
			} `json:"permissions"`
		} `json:"attributes"`
	}
	ups := r.Components["org.keycloak.userprofile.UserProfileProvider"]
	if len(ups) != 1 || len(ups[0].Config["kc.user.profile.config"]) != 1 {
		t.Fatal("realm.json: want one declarative user profile")
	}
	if err := json.Unmarshal([]byte(ups[0].Config["kc.user.profile.config"][0]), &profile); err != nil {
		t.Fatalf("user profile: %v", err)
	}
	if profile.UnmanagedAttributePolicy == "ENABLED" {
		t.Error("user profile: unmanaged attributes editable by users")
	}
	declared := false
	for _, a := range profile.Attributes {
		if a.Name == "plan" {
			declared = true
			if !slices.Equal(a.Permissions.Edit, []string{"admin"}) {
				t.Errorf("user profile: plan editable by %q, want admin only", a.Permissions.Edit)
			}
		}
	}
	if !declared {
		t.Error("user profile does not declare plan")
	}
}

// kubeObject is the part of a Kubernetes object these tests read.
type kubeObject struct {
	APIVersion string `yaml:"apiVersion"`
	Kind       string `yaml:"kind"`
	Metadata   struct {
		Name   string            `yaml:"name"`
		Labels map[string]string `yaml:"labels"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec yaml.Node         `yaml:"spec"`
	file string
}

func kubeObjects(t *testing.T) map[string]kubeObject {
	t.Helper()
	files, err := filepath.Glob("k8s/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no k8s/*.yaml: %v", err)
	}
	objs := map[string]kubeObject{}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := yaml.NewDecoder(bytes.NewReader(data))
		for i := 0; ; i++ {
			var o kubeObject
			err := dec.Decode(&o)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s document %d: %v", f, i, err)
			}
			if o.APIVersion == "" || o.Kind == "" || o.Metadata.Name == "" {
				t.Fatalf("%s document %d: want apiVersion, kind and metadata.name", f, i)
			}
			o.file = f
			key := o.Kind + "/" + o.Metadata.Name
			if _, dup := objs[key]; dup {
				t.Errorf("%s defined twice", key)
			}
			objs[key] = o
		}
	}
	return objs
}

func kubeObj(t *testing.T, objs map[string]kubeObject, key, apiVersion string, spec any) kubeObject {
	t.Helper()
	o, ok := objs[key]
	if !ok {
		t.Fatalf("deploy/k8s has no %s", key)
	}
	if o.APIVersion != apiVersion {
		t.Errorf("%s: apiVersion %s, want %s", key, o.APIVersion, apiVersion)
	}
	if spec != nil {
		if err := o.Spec.Decode(spec); err != nil {
			t.Fatalf("%s spec: %v", key, err)
		}
	}
	return o
}

type probe struct {
	HTTPGet *struct {
		Path string      `yaml:"path"`
		Port intOrString `yaml:"port"`
	} `yaml:"httpGet"`
}

type intOrString string

type envVar struct {
	Name      string `yaml:"name"`
	Value     string `yaml:"value"`
	ValueFrom *struct {
		SecretKeyRef *struct{ Name, Key string } `yaml:"secretKeyRef"`
		FieldRef     *struct {
			FieldPath string `yaml:"fieldPath"`
		} `yaml:"fieldRef"`
	} `yaml:"valueFrom"`
}

type deploymentSpec struct {
	Replicas *int `yaml:"replicas"`
	Selector struct {
		MatchLabels map[string]string `yaml:"matchLabels"`
	} `yaml:"selector"`
	Template struct {
		Metadata struct {
			Labels map[string]string `yaml:"labels"`
		} `yaml:"metadata"`
		Spec struct {
			TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
			SecurityContext               struct {
				RunAsNonRoot bool `yaml:"runAsNonRoot"`
			} `yaml:"securityContext"`
			Containers []struct {
				Name            string   `yaml:"name"`
				Image           string   `yaml:"image"`
				ImagePullPolicy string   `yaml:"imagePullPolicy"`
				Args            []string `yaml:"args"`
				Ports           []struct {
					Name          string `yaml:"name"`
					ContainerPort int    `yaml:"containerPort"`
				} `yaml:"ports"`
				Env          []envVar `yaml:"env"`
				VolumeMounts []struct {
					Name      string `yaml:"name"`
					MountPath string `yaml:"mountPath"`
				} `yaml:"volumeMounts"`
				Resources struct {
					Requests map[string]string `yaml:"requests"`
					Limits   map[string]string `yaml:"limits"`
				} `yaml:"resources"`
				SecurityContext struct {
					AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
					ReadOnlyRootFilesystem   bool  `yaml:"readOnlyRootFilesystem"`
					RunAsNonRoot             bool  `yaml:"runAsNonRoot"`
					Capabilities             struct {
						Drop []string `yaml:"drop"`
					} `yaml:"capabilities"`
				} `yaml:"securityContext"`
				LivenessProbe  probe `yaml:"livenessProbe"`
				ReadinessProbe probe `yaml:"readinessProbe"`
				StartupProbe   probe `yaml:"startupProbe"`
			} `yaml:"containers"`
			Volumes []struct {
				Name      string `yaml:"name"`
				ConfigMap *struct {
					Name string `yaml:"name"`
				} `yaml:"configMap"`
			} `yaml:"volumes"`
		} `yaml:"spec"`
	} `yaml:"template"`
}

func TestKubernetesManifestsAreConsistent(t *testing.T) {
	objs := kubeObjects(t)

	var dep deploymentSpec
	kubeObj(t, objs, "Deployment/edge", "apps/v1", &dep)
	if dep.Replicas != nil {
		t.Errorf("Deployment/edge sets replicas: %d: the HPA owns the count, and every apply would reset it", *dep.Replicas)
	}
	for k, v := range dep.Selector.MatchLabels {
		if dep.Template.Metadata.Labels[k] != v {
			t.Errorf("Deployment/edge: selector %s=%s does not match the pod labels", k, v)
		}
	}
	if len(dep.Template.Spec.Containers) != 1 {
		t.Fatalf("Deployment/edge: want one container, got %d", len(dep.Template.Spec.Containers))
	}
	c := dep.Template.Spec.Containers[0]

	// The image is the one compose builds.
	p := loadCompose(t)
	if imageRepo(c.Image) != imageRepo(service(t, p, "edge-1").Image) {
		t.Errorf("Deployment/edge runs %s, compose builds %s", c.Image, service(t, p, "edge-1").Image)
	}

	// Ports by name and number; probes and Services use them.
	ports := map[string]int{}
	for _, cp := range c.Ports {
		ports[cp.Name] = cp.ContainerPort
	}
	resolve := func(what string, ref intOrString) int {
		if n, err := strconv.Atoi(string(ref)); err == nil {
			for _, cp := range ports {
				if cp == n {
					return n
				}
			}
			t.Errorf("%s: port %d is no container port", what, n)
			return n
		}
		n, ok := ports[string(ref)]
		if !ok {
			t.Errorf("%s: port %q is no container port name", what, ref)
		}
		return n
	}

	// The configuration: the generated ConfigMap's file with the
	// Deployment's variables, through the edge's own loader and validation.
	cmName, file := generatedConfigMap(t, "edge-config", "edge.yaml")
	vars := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			vars[e.Name] = "from-secret-" + e.ValueFrom.SecretKeyRef.Name
		default:
			vars[e.Name] = e.Value
		}
	}
	cfg, err := config.LoadData("ConfigMap/"+cmName+" edge.yaml", []byte(file), func(n string) string { return vars[n] })
	if err != nil {
		t.Fatalf("the edge's configuration on Kubernetes: %v", err)
	}
	if i := slices.Index(c.Args, "-config"); i < 0 || i+1 >= len(c.Args) || filepath.Dir(c.Args[i+1]) != mountPath(t, dep, "config") ||
		filepath.Base(c.Args[i+1]) != "edge.yaml" {
		t.Errorf("Deployment/edge: args %q do not name the mounted ConfigMap's edge.yaml", c.Args)
	}
	for _, v := range dep.Template.Spec.Volumes {
		if v.Name == "config" && (v.ConfigMap == nil || v.ConfigMap.Name != cmName) {
			t.Errorf("Deployment/edge: volume config is not ConfigMap/%s", cmName)
		}
	}
	secret := false
	for _, e := range c.Env {
		if e.Name == "EDGE_REDIS_PASSWORD" {
			secret = e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.Value == ""
		}
	}
	if !secret {
		t.Error("Deployment/edge: EDGE_REDIS_PASSWORD must come from a Secret")
	}
	if u := mustURL(t, vars["OTEL_EXPORTER_OTLP_ENDPOINT"]); u.Port() == "4317" && vars["OTEL_EXPORTER_OTLP_PROTOCOL"] != "grpc" {
		t.Error("Deployment/edge: OTLP endpoint on 4317 wants OTEL_EXPORTER_OTLP_PROTOCOL=grpc")
	}
	if strings.Contains(file, "password") {
		t.Error("ConfigMap/edge-config mentions a password: secrets belong in a Secret")
	}

	api, admin := port(t, cfg.Listen.Addr), port(t, cfg.Admin.Addr)
	if strconv.Itoa(ports["http"]) != api || strconv.Itoa(ports["admin"]) != admin {
		t.Errorf("container ports %v, the edge listens on %s and %s", ports, cfg.Listen.Addr, cfg.Admin.Addr)
	}
	for name, pr := range map[string]probe{"liveness": c.LivenessProbe, "readiness": c.ReadinessProbe, "startup": c.StartupProbe} {
		if pr.HTTPGet == nil {
			if name != "startup" {
				t.Errorf("Deployment/edge: no %s probe", name)
			}
			continue
		}
		if got := resolve(name+" probe", pr.HTTPGet.Port); strconv.Itoa(got) != admin {
			t.Errorf("%s probe on port %d, want the admin port %s", name, got, admin)
		}
	}
	if c.LivenessProbe.HTTPGet == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Error("liveness probe must ask /healthz")
	}
	if c.ReadinessProbe.HTTPGet == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Error("readiness probe must ask /readyz")
	}

	// Draining outlasts the edge's own shutdown grace.
	if grace := time.Duration(dep.Template.Spec.TerminationGracePeriodSeconds) * time.Second; grace <= cfg.Listen.ShutdownGrace {
		t.Errorf("terminationGracePeriodSeconds %s is not above listen.shutdown_grace %s", grace, cfg.Listen.ShutdownGrace)
	}

	// Locked down, with resources.
	sc := c.SecurityContext
	if !dep.Template.Spec.SecurityContext.RunAsNonRoot && !sc.RunAsNonRoot {
		t.Error("Deployment/edge: runAsNonRoot not set")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !sc.ReadOnlyRootFilesystem || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Error("Deployment/edge: want allowPrivilegeEscalation false, readOnlyRootFilesystem true, capabilities drop ALL")
	}
	if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
		t.Error("Deployment/edge: want cpu and memory requests and a memory limit (the HPA scales on CPU requests)")
	}

	// Services: the API port and the admin port, each to a container port by name or number.
	type servicePort struct {
		Name       string      `yaml:"name"`
		Port       int         `yaml:"port"`
		TargetPort intOrString `yaml:"targetPort"`
	}
	type serviceSpec struct {
		Selector map[string]string `yaml:"selector"`
		Ports    []servicePort     `yaml:"ports"`
	}
	servicePorts := map[int]string{}
	for _, name := range []string{"Service/edge", "Service/edge-admin"} {
		var s serviceSpec
		kubeObj(t, objs, name, "v1", &s)
		for k, v := range s.Selector {
			if dep.Template.Metadata.Labels[k] != v {
				t.Errorf("%s selects %s=%s, which the edge's pods lack", name, k, v)
			}
		}
		for _, sp := range s.Ports {
			got := resolve(name+" targetPort", sp.TargetPort)
			servicePorts[got] = name
		}
	}
	if servicePorts[ports["http"]] != "Service/edge" || servicePorts[ports["admin"]] == "" {
		t.Errorf("Services expose container ports %v, want the API port on Service/edge and the admin port", servicePorts)
	}

	// PodDisruptionBudget and HPA point at the Deployment.
	var pdb struct {
		MinAvailable   *intOrString `yaml:"minAvailable"`
		MaxUnavailable *intOrString `yaml:"maxUnavailable"`
		Selector       struct {
			MatchLabels map[string]string `yaml:"matchLabels"`
		} `yaml:"selector"`
	}
	kubeObj(t, objs, "PodDisruptionBudget/edge", "policy/v1", &pdb)
	if pdb.MinAvailable == nil && pdb.MaxUnavailable == nil {
		t.Error("PodDisruptionBudget/edge: neither minAvailable nor maxUnavailable")
	}
	for k, v := range pdb.Selector.MatchLabels {
		if dep.Template.Metadata.Labels[k] != v {
			t.Errorf("PodDisruptionBudget/edge selects %s=%s, which the edge's pods lack", k, v)
		}
	}
	var hpa struct {
		ScaleTargetRef struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
			Name       string `yaml:"name"`
		} `yaml:"scaleTargetRef"`
		MinReplicas int `yaml:"minReplicas"`
		MaxReplicas int `yaml:"maxReplicas"`
		Metrics     []struct {
			Type     string `yaml:"type"`
			Resource struct {
				Name string `yaml:"name"`
			} `yaml:"resource"`
		} `yaml:"metrics"`
	}
	kubeObj(t, objs, "HorizontalPodAutoscaler/edge", "autoscaling/v2", &hpa)
	if hpa.ScaleTargetRef.APIVersion != "apps/v1" || hpa.ScaleTargetRef.Kind != "Deployment" || hpa.ScaleTargetRef.Name != "edge" {
		t.Errorf("HPA targets %+v, want apps/v1 Deployment edge", hpa.ScaleTargetRef)
	}
	if hpa.MinReplicas < 2 || hpa.MaxReplicas < hpa.MinReplicas {
		t.Errorf("HPA replicas %d-%d, want at least 2", hpa.MinReplicas, hpa.MaxReplicas)
	}
	if len(hpa.Metrics) == 0 || hpa.Metrics[0].Type != "Resource" || hpa.Metrics[0].Resource.Name != "cpu" {
		t.Error("HPA does not scale on CPU")
	}
	// At the HPA's floor a Redis outage keeps limits at most exact (local_share <= 1/min replicas).
	if cfg.Limits.LocalShare > 1/float64(hpa.MinReplicas)+1e-9 {
		t.Errorf("limits.local_share %.2f lets %d replicas admit more than a limit while Redis is down", cfg.Limits.LocalShare, hpa.MinReplicas)
	}

	// The kustomization lists every file.
	var k struct {
		Resources []string `yaml:"resources"`
	}
	readYAML(t, "k8s/kustomization.yaml", &k)
	for _, o := range objs {
		if !slices.Contains(k.Resources, filepath.Base(o.file)) {
			t.Errorf("kustomization.yaml does not list %s", filepath.Base(o.file))
		}
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join("k8s", r)); err != nil {
			t.Errorf("kustomization.yaml: %v", err)
		}
	}
}

func mountPath(t *testing.T, dep deploymentSpec, volume string) string {
	t.Helper()
	for _, m := range dep.Template.Spec.Containers[0].VolumeMounts {
		if m.Name == volume {
			return m.MountPath
		}
	}
	t.Fatalf("Deployment/edge mounts no volume %s", volume)
	return ""
}

func TestOperationsDocExplainsEveryMetric(t *testing.T) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	reported := map[string]bool{}
	for _, e := range dashboardAndAlertExprs(t) {
		names, err := metricNames(e.expr)
		if err != nil {
			continue // TestDashboardAndAlertExpressionsParse reports it
		}
		for _, n := range names {
			base := histogramBase(n)
			if n == "up" || strings.HasPrefix(n, "go_") || strings.HasPrefix(n, "process_") || reported[base] {
				continue
			}
			if !bytes.Contains(doc, []byte("`"+base)) {
				reported[base] = true
				t.Errorf("docs/operations.md does not explain %s (used by %s)", base, e.where)
			}
		}
	}
}

func histogramBase(name string) string {
	for _, s := range []string{"_bucket", "_sum", "_count"} {
		if b, ok := strings.CutSuffix(name, s); ok && strings.HasSuffix(b, "_seconds") {
			return b
		}
	}
	return name
}
