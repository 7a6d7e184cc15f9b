package config_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/orgedge/edge/config"
)

// envNames are the variables Load reads.
var envNames = []string{
	"EDGE_LISTEN_ADDR", "EDGE_TLS_CERT_FILE", "EDGE_TLS_KEY_FILE", "EDGE_CONNECTION_BOUND_EXEMPT", "EDGE_ADMIN_ADDR",
	"EDGE_UPSTREAM_URL", "EDGE_OIDC_ISSUER_URL", "EDGE_OIDC_AUDIENCE",
	"EDGE_REDIS_ADDR", "EDGE_REDIS_CLUSTER_ADDRS", "EDGE_REDIS_USERNAME", "EDGE_REDIS_PASSWORD",
	"EDGE_REDIS_SENTINEL_MASTER", "EDGE_REDIS_SENTINEL_ADDRS", "EDGE_REDIS_SENTINEL_USERNAME", "EDGE_REDIS_SENTINEL_PASSWORD",
	"EDGE_REDIS_TLS", "EDGE_REDIS_TLS_CA_FILE", "EDGE_REDIS_TLS_SERVER_NAME", "EDGE_REDIS_TLS_CERT_FILE", "EDGE_REDIS_TLS_KEY_FILE",
	"EDGE_ON_REDIS_FAILURE", "EDGE_LOG_FORMAT", "EDGE_LOG_LEVEL",
}

// clearEnv unsets Load's variables for the test, so that the machine's
// environment cannot change its outcome.
func clearEnv(t *testing.T) {
	t.Helper()
	for _, name := range envNames {
		t.Setenv(name, "")
	}
}

// writeConfig writes content to a file in a new temporary directory.
func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edge.yaml")
	writeFile(t, path, content)
	return path
}

// getenv serves variables from a map, as ApplyEnv's argument.
func getenv(vars map[string]string) func(string) string {
	return func(name string) string { return vars[name] }
}

func TestExampleFileIsTheDefaultsWithTheTwoURLs(t *testing.T) {
	clearEnv(t)
	t.Setenv("EDGE_REDIS_ADDR", "127.0.0.1:6379") // the file names none: a deployment must
	got, err := config.Load("edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := valid(); !reflect.DeepEqual(got, want) {
		t.Errorf("edge.yaml and Default have drifted apart.\nedge.yaml:\n%s\nDefault with the URLs:\n%s", got, want)
	}
}

func TestExampleFileSetsEveryField(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("edge.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Every key of the marshaled defaults appears in the example, so that a
	// field added to Config is documented there too.
	for line := range strings.Lines(valid().String()) {
		key, _, ok := strings.Cut(strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- ")), ":")
		if ok && !bytes.Contains(data, []byte(key+":")) {
			t.Errorf("edge.yaml does not set %s", key)
		}
	}
}

func TestUnknownFieldIsNamedWithItsLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		yaml string
		want string
	}{
		{"listen:\n  addr: 127.0.0.1:8080\n  adress: x\n",
			"line 3: listen.adress: unknown field; expected one of addr, tls, read_header_timeout, idle_timeout, max_header_bytes, shutdown_grace"},
		{"upstreams:\n  url: http://x:1\n",
			"line 1: upstreams: unknown field; expected one of listen, admin, upstream, oidc, requests, redis, limits, idempotency, operations, cors, log"},
		{"listen:\n  tls:\n    cert: a.pem\n",
			"line 3: listen.tls.cert: unknown field; expected one of cert_file, key_file"},
		{"operations:\n  - procedure: /svc.v1.UsageService/GetUsage\n    roles: [svc-admin]\n",
			"line 3: operations[0].roles: unknown field; expected one of procedure, service_account_roles, idempotent, read_only, rate_per_minute, concurrent_streams, quota, shadow"},
		{"redis:\n  timeout: 1s\n  pasword: x\nlog:\n  colour: true\n",
			"2 problems:\n" +
				"  line 3: redis.pasword: unknown field; expected one of addr, cluster_addrs, sentinel, username, password, tls, key_prefix, timeout, pool_timeout, pool_size, min_idle_conns\n" +
				"  line 5: log.colour: unknown field; expected one of format, level"},
	}
	for _, tt := range tests {
		_, err := config.Parse([]byte(tt.yaml))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v\nwant %s", tt.yaml, err, tt.want)
		}
	}
}

func TestUnknownFieldInsideAnAliasIsStillRefused(t *testing.T) {
	t.Parallel()
	// The walk does not follow aliases; the strict decoder still refuses
	// the field, with yaml's message and line.
	yaml := "listen:\n  tls: &t\n    cert_file: a.crt\n    key_file: a.key\nadmin: *t\n"
	if _, err := config.Parse([]byte(yaml)); err == nil || !strings.Contains(err.Error(), "line 3: listen.tls.cert_file: field cert_file not found in type config.Admin") {
		t.Errorf("Parse = %v", err)
	}
	// A merge of known fields decodes.
	c, err := config.Parse([]byte("listen:\n  <<: {addr: '127.0.0.1:1'}\n  idle_timeout: 1m\n"))
	if err != nil || c.Listen.Addr != "127.0.0.1:1" {
		t.Errorf("merge: %v, %+v", err, c)
	}
}

func TestMalformedYAMLKeepsItsLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		yaml string
		want string
	}{
		{"listen:\n  addr: [\n", "yaml: line 2: did not find expected node content"},
		{"listen:\n\taddr: x\n", "yaml: line 2:"},
		{"listen:\n  idle_timeout: 5\n", "line 2: listen.idle_timeout: cannot unmarshal !!int `5` into time.Duration"},
		{"listen:\n  idle_timeout: soon\n", "line 2: listen.idle_timeout: cannot unmarshal !!str `soon` into time.Duration"},
		{"oidc:\n  token_cache_size: many\n", "line 2: oidc.token_cache_size: cannot unmarshal !!str `many` into int"},
		{"oidc:\n  role_claims: realm_access.roles\n", "line 2: oidc.role_claims: cannot unmarshal !!str `realm_a...` into []string"},
		{"operations:\n  - procedure: /svc.v1.UsageService/GetUsage\n    service_account_roles:\n      - svc-admin\n      - [svc-viewer]\n",
			"line 5: operations[0].service_account_roles[1]: cannot unmarshal !!seq into string"},
		{"listen:\n  addr: a:1\n  addr: b:2\n", `line 3: listen.addr: mapping key "addr" already defined at line 2`},
		{"log:\n  level: 3s\n  format: [a]\nlisten:\n  idle_timeout: x\n",
			"2 problems:\n  line 3: log.format: cannot unmarshal !!seq into string\n  line 5: listen.idle_timeout: cannot unmarshal !!str `x` into time.Duration"},
		{"log:\n  level: info\n---\nlog:\n  level: warn\n", "line 3: a second YAML document; the file must hold one"},
		{"- listen\n", "line 1: cannot unmarshal !!seq into config.Config"},
	}
	for _, tt := range tests {
		_, err := config.Parse([]byte(tt.yaml))
		if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v\nwant %s", tt.yaml, err, tt.want)
		}
	}
}

func TestEmptyFileKeepsEveryDefault(t *testing.T) {
	t.Parallel()
	for _, yaml := range []string{"", "\n", "# only a comment\n", "---\n", "listen:\n"} {
		c, err := config.Parse([]byte(yaml))
		if err != nil || !reflect.DeepEqual(c, config.Default()) {
			t.Errorf("Parse(%q) = %v, %v; want Default", yaml, c, err)
		}
	}
}

func TestOmittedFieldsKeepTheirDefaults(t *testing.T) {
	t.Parallel()
	c, err := config.Parse([]byte("listen:\n  addr: 0.0.0.0:443\nredis:\n  addr: redis:6379\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := config.Default()
	want.Listen.Addr = "0.0.0.0:443"
	want.Redis.Addr = "redis:6379"
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got\n%s\nwant\n%s", c, want)
	}
}

func TestEnvironmentOverridesTheFile(t *testing.T) {
	t.Parallel()
	file := `
listen: {addr: "127.0.0.1:1", tls: {cert_file: f.crt, key_file: f.key}}
admin: {addr: "127.0.0.1:2"}
upstream: {url: "http://file:1"}
oidc: {issuer_url: "http://file/realms/x", audience: file}
redis: {addr: "file:6379", username: file, password: file}
limits: {on_redis_failure: fail_closed}
log: {format: text, level: debug}
`
	c, err := config.Parse([]byte(file))
	if err != nil {
		t.Fatal(err)
	}
	c.ApplyEnv(getenv(map[string]string{
		"EDGE_LISTEN_ADDR":         "0.0.0.0:8443",
		"EDGE_TLS_CERT_FILE":       "env.crt",
		"EDGE_TLS_KEY_FILE":        "env.key",
		"EDGE_ADMIN_ADDR":          "0.0.0.0:9090",
		"EDGE_UPSTREAM_URL":        "http://orgsvc:8082",
		"EDGE_OIDC_ISSUER_URL":     "https://id.example.com/realms/prod",
		"EDGE_OIDC_AUDIENCE":       "edge",
		"EDGE_REDIS_CLUSTER_ADDRS": " redis-0:6379, redis-1:6379,,",
		"EDGE_REDIS_USERNAME":      "edge",
		"EDGE_REDIS_PASSWORD":      "s3cret",
		"EDGE_ON_REDIS_FAILURE":    "fail_open",
		"EDGE_LOG_FORMAT":          "json",
		"EDGE_LOG_LEVEL":           "warn",
	}))
	want := config.Default()
	want.Listen.Addr = "0.0.0.0:8443"
	want.Listen.TLS = config.TLS{CertFile: "env.crt", KeyFile: "env.key"}
	want.Admin.Addr = "0.0.0.0:9090"
	want.Upstream.URL = "http://orgsvc:8082"
	want.OIDC.IssuerURL = "https://id.example.com/realms/prod"
	want.OIDC.Audience = "edge"
	want.Redis.Addr, want.Redis.ClusterAddrs = "", []string{"redis-0:6379", "redis-1:6379"} // and redis.addr from the file cleared
	want.Redis.Username = "edge"
	want.Redis.Password = "s3cret"
	want.Limits.OnRedisFailure = "fail_open"
	want.Log.Format, want.Log.Level = "json", "warn"
	if !reflect.DeepEqual(c, want) {
		t.Errorf("got\n%s\nwant\n%s", c, want)
	}
	if c.Redis.Password != "s3cret" {
		t.Errorf("password %q", c.Redis.Password)
	}
}

func TestEnvironmentRedisVariables(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		file        config.Redis
		env         map[string]string
		wantAddr    string
		wantCluster []string
	}{
		{"addr replaces the file's cluster", config.Redis{ClusterAddrs: []string{"c:1"}},
			map[string]string{"EDGE_REDIS_ADDR": "r:6379"}, "r:6379", nil},
		{"cluster replaces the file's addr", config.Redis{Addr: "r:1"},
			map[string]string{"EDGE_REDIS_CLUSTER_ADDRS": "a:1,b:2"}, "", []string{"a:1", "b:2"}},
		{"both variables are kept for Validate to refuse", config.Redis{},
			map[string]string{"EDGE_REDIS_ADDR": "r:1", "EDGE_REDIS_CLUSTER_ADDRS": "a:1"}, "r:1", []string{"a:1"}},
		{"empty variables are unset", config.Redis{Addr: "r:1"},
			map[string]string{"EDGE_REDIS_ADDR": "", "EDGE_REDIS_CLUSTER_ADDRS": ""}, "r:1", nil},
	}
	for _, tt := range tests {
		c := config.Default()
		c.Redis.Addr, c.Redis.ClusterAddrs = tt.file.Addr, tt.file.ClusterAddrs
		c.ApplyEnv(getenv(tt.env))
		if c.Redis.Addr != tt.wantAddr || !slices.Equal(c.Redis.ClusterAddrs, tt.wantCluster) {
			t.Errorf("%s: addr %q, cluster %q; want %q, %q", tt.name, c.Redis.Addr, c.Redis.ClusterAddrs, tt.wantAddr, tt.wantCluster)
		}
	}
}

func TestLoadAppliesTheEnvironmentAndSaysWhenAValueCameFromIt(t *testing.T) {
	clearEnv(t)
	path := writeConfig(t, "upstream:\n  url: http://file:8082\noidc:\n  issuer_url: http://file/realms/dev\n  audience: api\nredis:\n  addr: file:6379\n")

	t.Setenv("EDGE_UPSTREAM_URL", "http://env:8082")
	t.Setenv("EDGE_LOG_LEVEL", "debug")
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if c.Upstream.URL != "http://env:8082" || c.Log.Level != "debug" || c.OIDC.IssuerURL != "http://file/realms/dev" {
		t.Errorf("upstream %q, level %q, issuer %q", c.Upstream.URL, c.Log.Level, c.OIDC.IssuerURL)
	}

	t.Setenv("EDGE_UPSTREAM_URL", "https://env:8443")
	t.Setenv("EDGE_REDIS_CLUSTER_ADDRS", "redis-0")
	_, err = config.Load(path)
	want := "config " + path + ": 2 problems:\n" +
		"  upstream.url: TLS to the backend is not supported yet: the edge speaks cleartext HTTP/2 (h2c) to it; use http://host:port (set by EDGE_UPSTREAM_URL)\n" +
		`  redis.cluster_addrs[0]: "redis-0" is not host:port (set by EDGE_REDIS_CLUSTER_ADDRS)`
	if err == nil || err.Error() != want {
		t.Errorf("Load = %v\nwant %s", err, want)
	}

	t.Setenv("EDGE_UPSTREAM_URL", "")
	t.Setenv("EDGE_REDIS_CLUSTER_ADDRS", "")
	dir := t.TempDir()
	cert, _ := writeSelfSigned(t, dir, "a")
	_, key := writeSelfSigned(t, dir, "b")
	t.Setenv("EDGE_TLS_CERT_FILE", cert)
	t.Setenv("EDGE_TLS_KEY_FILE", key)
	_, err = config.Load(path)
	want = "config " + path + ": listen.tls: cert_file and key_file do not load as a key pair: tls: private key does not match public key (set by EDGE_TLS_CERT_FILE, EDGE_TLS_KEY_FILE)"
	if err == nil || err.Error() != want {
		t.Errorf("Load = %v\nwant %s", err, want)
	}
}

func TestLoadNamesTheLineOfAnInvalidValue(t *testing.T) {
	clearEnv(t)
	path := writeConfig(t, `upstream:
  url: http://127.0.0.1:8082/api
oidc:
  issuer_url: http://127.0.0.1:8081/realms/dev
  audience: api
  role_claims: [realm_access.roles, ""]
redis:
  cluster_addrs:
    - redis-0:6379
    - redis-1
`)
	_, err := config.Load(path)
	want := "config " + path + ": 3 problems:\n" +
		`  line 2: upstream.url: must not have a path ("/api"): the edge forwards each call's /svc.v1.<Service>/<Method> as is` + "\n" +
		`  line 6: oidc.role_claims[1]: "" is not a dotted claim path such as realm_access.roles` + "\n" +
		`  line 10: redis.cluster_addrs[1]: "redis-1" is not host:port`
	if err == nil || err.Error() != want {
		t.Errorf("Load = %v\nwant %s", err, want)
	}
}

// table writes the default operation table as YAML, with change applied to
// the rows first.
func table(change func(ops []config.Operation) []config.Operation) string {
	var b strings.Builder
	b.WriteString("upstream: {url: 'http://127.0.0.1:8082'}\n")
	b.WriteString("oidc: {issuer_url: 'http://127.0.0.1:8081/realms/dev', audience: api}\n")
	b.WriteString("operations:\n")
	for _, op := range change(config.DefaultOperations()) {
		fmt.Fprintf(&b, "  - procedure: %s\n    service_account_roles: [%s]\n    idempotent: %v\n",
			op.Procedure, strings.Join(op.ServiceAccountRoles, ", "), op.Idempotent)
	}
	b.WriteString("redis: {addr: '127.0.0.1:6379'}\n")
	return b.String()
}

func TestOperationsListReplacesTheDefaultTable(t *testing.T) {
	clearEnv(t)
	// Only svc-admin may search the catalog; everything else as shipped.
	path := writeConfig(t, table(func(ops []config.Operation) []config.Operation {
		ops[0].ServiceAccountRoles = []string{"svc-admin"}
		slices.Reverse(ops) // order does not matter
		return ops
	}))
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(c.Operations, func(op config.Operation) bool {
		return op.Procedure == "/svc.v1.BlueprintService/SearchCatalog"
	})
	if len(c.Operations) != 22 || i < 0 || !slices.Equal(c.Operations[i].ServiceAccountRoles, []string{"svc-admin"}) {
		t.Errorf("operations = %+v", c.Operations)
	}
}

func TestOperationsTableProblems(t *testing.T) {
	clearEnv(t)
	// The table's rows start at line 4 and take 3 lines each: row i's
	// procedure is on line 4+3i.
	tests := []struct {
		name   string
		change func(ops []config.Operation) []config.Operation
		want   string
	}{
		{"a row for one procedure only", func(ops []config.Operation) []config.Operation { return ops[6:7] },
			"21 problems:\n" +
				`  line 3: operations: no row for "/svc.v1.BlueprintService/SearchCatalog" (a list in the file replaces the whole default table)` + "\n" +
				`  line 3: operations: no row for "/svc.v1.BlueprintService/ValidateBlueprint" (a list in the file replaces the whole default table)`},
		{"missing GetUsage", func(ops []config.Operation) []config.Operation { return ops[:21] },
			`line 3: operations: no row for "/svc.v1.UsageService/GetUsage" (a list in the file replaces the whole default table)`},
		{"duplicate row", func(ops []config.Operation) []config.Operation { return append(ops, ops[3]) },
			`line 70: operations[22].procedure: "/svc.v1.EnvironmentService/DeleteEnvironment" is listed already, as operations[3]`},
		{"unknown procedure", func(ops []config.Operation) []config.Operation {
			ops[21].Procedure = "/svc.v1.UsageService/GetUsages"
			return ops
		}, "2 problems:\n" +
			`  line 67: operations[21].procedure: unknown procedure "/svc.v1.UsageService/GetUsages"` + "\n" +
			`  line 3: operations: no row for "/svc.v1.UsageService/GetUsage" (a list in the file replaces the whole default table)`},
		{"idempotent WatchEnvironment", func(ops []config.Operation) []config.Operation {
			ops[6].Idempotent = true
			return ops
		}, `line 24: operations[6].idempotent: "/svc.v1.EnvironmentService/WatchEnvironment" is a streaming procedure; Idempotency-Key applies to unary calls only`},
		{"a person's role", func(ops []config.Operation) []config.Operation {
			ops[8].ServiceAccountRoles = []string{"admin"}
			return ops
		}, `line 29: operations[8].service_account_roles[0]: "admin" is not a service-account role: it must start with "svc-"`},
	}
	for _, tt := range tests {
		path := writeConfig(t, table(tt.change))
		_, err := config.Load(path)
		want := "config " + path + ": " + tt.want
		if err == nil || !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: Load = %v\nwant %s", tt.name, err, want)
		}
	}
}

func TestEmptyOperationsListIsRefused(t *testing.T) {
	t.Parallel()
	for _, yaml := range []string{"operations: []\n", "operations:\n"} {
		c, err := config.Parse([]byte(yaml))
		if err != nil {
			t.Fatal(err)
		}
		c.Upstream.URL, c.OIDC.IssuerURL, c.OIDC.Audience = "http://127.0.0.1:8082", "http://127.0.0.1:8081/realms/dev", "api"
		c.Redis.Addr = "redis:6379"
		want := "operations: empty: list a row for every procedure, or omit operations to use the default table"
		if err := c.Validate(); err == nil || err.Error() != want {
			t.Errorf("%q: Validate() = %v, want %s", yaml, err, want)
		}
	}
}

func TestLoadRefusesAFileTooLargeOrMissing(t *testing.T) {
	clearEnv(t)
	big := writeConfig(t, "# "+strings.Repeat("x", 1<<20)+"\n")
	if _, err := config.Load(big); err == nil || !strings.Contains(err.Error(), "larger than 1MiB") {
		t.Errorf("Load(big) = %v", err)
	}
	missing := filepath.Join(t.TempDir(), "none.yaml")
	if _, err := config.Load(missing); err == nil || err.Error() != "config: open "+missing+": no such file or directory" {
		t.Errorf("Load(missing) = %v", err)
	}
}

func TestPasswordIsNeverShown(t *testing.T) {
	t.Parallel()
	c := valid()
	c.Redis.Password = "hunter2-s3cret"
	c.Redis.Username = "edge"

	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "config", c)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "config", *c, "redis", c.Redis)
	shown := map[string]string{
		"String":        c.String(),
		"%v":            fmt.Sprintf("%v", c),
		"%+v of value":  fmt.Sprintf("%+v", *c),
		"%v of redis":   fmt.Sprintf("%+v", c.Redis),
		"slog handlers": logs.String(),
	}
	for how, s := range shown {
		if strings.Contains(s, "hunter2") {
			t.Errorf("%s shows the password:\n%s", how, s)
		}
		if !strings.Contains(s, "REDACTED") {
			t.Errorf("%s does not show that a password is set:\n%s", how, s)
		}
	}
	if c.Redis.Password != "hunter2-s3cret" {
		t.Error("redacting changed the configuration")
	}
}

func TestLogValueIsReadable(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	c := valid()
	c.Limits.SubjectPlans = map[string]string{"alice": "pro"}
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("start", "config", c)
	var line struct {
		Config struct {
			Listen struct {
				IdleTimeout    string `json:"idle_timeout"`
				MaxHeaderBytes string `json:"max_header_bytes"`
			} `json:"listen"`
			Redis struct {
				Password string `json:"password"`
			} `json:"redis"`
			Limits struct {
				Plans map[string]struct {
					RequestsPerMinute int `json:"requests_per_minute"`
					Quotas            struct {
						VCPUHoursPerMonth any `json:"vcpu_hours_per_month"`
					} `json:"quotas"`
				} `json:"plans"`
				SubjectPlans map[string]string `json:"subject_plans"`
				StreamLease  string            `json:"stream_lease"`
				LocalShare   float64           `json:"local_share"`
			} `json:"limits"`
			Operations map[string]string `json:"operations"`
		} `json:"config"`
	}
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatalf("%v: %s", err, buf.String())
	}
	got := line.Config
	if got.Listen.IdleTimeout != "2m0s" || got.Listen.MaxHeaderBytes != "64KiB" || got.Redis.Password != "" ||
		got.Operations["/svc.v1.EnvironmentService/CreateEnvironment"] != "svc-admin,svc-env-manager idempotent rate_per_minute=10 quota=reserve_environment" ||
		got.Operations["/svc.v1.EnvironmentService/WatchEnvironment"] != "svc-admin,svc-env-manager,svc-viewer read_only concurrent_streams=20" ||
		got.Operations["/svc.v1.UsageService/GetUsage"] != "svc-admin,svc-env-manager,svc-viewer read_only" ||
		len(got.Operations) != 22 ||
		len(got.Limits.Plans) != 3 || got.Limits.Plans["pro"].RequestsPerMinute != 300 ||
		got.Limits.Plans["free"].Quotas.VCPUHoursPerMonth != 100.0 || got.Limits.Plans["pro"].Quotas.VCPUHoursPerMonth != "unlimited" ||
		got.Limits.SubjectPlans["alice"] != "pro" || got.Limits.StreamLease != "30s" || got.Limits.LocalShare != 0.5 {
		t.Errorf("logged %s", buf.String())
	}
}

func TestStringLoadsBack(t *testing.T) {
	t.Parallel()
	want := valid()
	want.Redis.ClusterAddrs = []string{"redis-0:6379"}
	want.Listen.MaxHeaderBytes = 1500
	want.Limits.Plans = map[string]config.Plan{"gold": {RequestsPerMinute: 5, Burst: 1, Quotas: config.Quotas{VCPUHoursPerMonth: 1.5}}}
	want.Limits.DefaultPlan = "gold"
	want.Limits.SubjectPlans = map[string]string{"a.b@example.com": "gold"}
	want.Limits.SubjectQuotas = map[string]config.Quotas{"alice": {ConcurrentEnvironments: 3}}
	want.Limits.LocalShare = 1.0 / 3
	got, err := config.Parse([]byte(want.String()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestAFileThatHoldsNoConfigurationNeverValidates(t *testing.T) {
	clearEnv(t)
	// The variables Compose sets: with them, the defaults alone would
	// validate, and an empty file would reset the policy to them.
	for name, v := range map[string]string{
		"EDGE_UPSTREAM_URL": "http://orgsvc:8082", "EDGE_OIDC_ISSUER_URL": "http://keycloak:8081/realms/orgedge",
		"EDGE_OIDC_AUDIENCE": "api", "EDGE_REDIS_ADDR": "redis:6379",
	} {
		t.Setenv(name, v)
	}
	for _, content := range []string{"", "\n\n", "# the policy\n", "---\n", "~\n"} {
		path := writeConfig(t, content)
		_, err := config.Load(path)
		if err == nil || !strings.Contains(err.Error(), "holds no configuration") {
			t.Errorf("Load of %q = %v, want refused as holding no configuration", content, err)
		}
	}
	if _, err := config.Load(writeConfig(t, "log: {level: info}\n")); err != nil {
		t.Errorf("a file with one setting: %v", err)
	}
}

func TestAConfigWithoutARedisIsRefusedUnlessItNamesALocalOne(t *testing.T) {
	clearEnv(t)
	const base = "upstream: {url: 'http://10.0.0.5:8082'}\noidc: {issuer_url: 'https://id.example.com/realms/x', audience: api}\n"
	_, err := config.Load(writeConfig(t, base))
	if err == nil || !strings.Contains(err.Error(), "redis: set addr, cluster_addrs or sentinel.addrs") {
		t.Errorf("Load without Redis = %v, want redis refused", err)
	}
	// The explicit local choice: the file (or EDGE_REDIS_ADDR) names it.
	c, err := config.Load(writeConfig(t, base+"redis: {addr: '127.0.0.1:6379'}\n"))
	if err != nil || c.Redis.Addr != "127.0.0.1:6379" {
		t.Errorf("Load with a local Redis = %v, %v", c, err)
	}
	t.Setenv("EDGE_REDIS_SENTINEL_ADDRS", "sentinel-0:26379")
	t.Setenv("EDGE_REDIS_SENTINEL_MASTER", "edge")
	if _, err := config.Load(writeConfig(t, base)); err != nil {
		t.Errorf("Load with sentinels from the environment: %v", err)
	}
}
