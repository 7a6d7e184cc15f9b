package config_test

import (
	"fmt"

	"github.com/orgedge/edge/config"
)

func ExampleLoadData() {
	env := map[string]string{"EDGE_REDIS_ADDR": "redis.internal:6379"}
	c, err := config.LoadData("edge.yaml", []byte(`
upstream:
  url: http://127.0.0.1:8082
oidc:
  issuer_url: https://id.example.com/realms/prod
  audience: orgedge-api
requests:
  max_body_bytes: 1MiB
`), func(name string) string { return env[name] })
	if err != nil {
		fmt.Println(err)
		return
	}
	// Fields the YAML omits keep their defaults; the variable sets its field.
	fmt.Println(c.Upstream.URL, c.Requests.MaxBodyBytes, c.Requests.MaxUnaryTimeout, c.Listen.Addr, c.Redis.Addr)
	// Output: http://127.0.0.1:8082 1MiB 30s 127.0.0.1:8080 redis.internal:6379
}

func ExampleLoadData_unknownField() {
	_, err := config.LoadData("edge.yaml", []byte(`
upstream:
  adress: http://127.0.0.1:8082
`), func(string) string { return "" })
	fmt.Println(err)
	// Output: config edge.yaml: line 3: upstream.adress: unknown field; expected one of url, urls, dial_timeout, admin_url, resolve_interval, max_connection_age, eject_for, health_check
}

func ExampleConfig_Validate() {
	c := config.Default()
	c.Upstream.URL = "https://orgsvc.internal:8443"
	c.OIDC.IssuerURL = "https://id.example.com/realms/prod"
	c.OIDC.Audience = "orgedge-api"
	c.Redis.Addr = "redis.internal:6379"
	c.Operations[6].Idempotent = true // WatchEnvironment
	fmt.Println(c.Validate())
	// Output:
	// 2 problems:
	//   upstream.url: TLS to the backend is not supported yet: the edge speaks cleartext HTTP/2 (h2c) to it; use http://host:port
	//   operations[6].idempotent: "/svc.v1.EnvironmentService/WatchEnvironment" is a streaming procedure; Idempotency-Key applies to unary calls only
}

func ExampleConfig_ApplyEnv() {
	c := config.Default()
	c.Redis.Addr = "redis.internal:6379"
	env := map[string]string{
		"EDGE_REDIS_CLUSTER_ADDRS": "redis-0:6379,redis-1:6379",
		"EDGE_LOG_LEVEL":           "debug",
	}
	c.ApplyEnv(func(name string) string { return env[name] })
	fmt.Printf("addr=%q cluster=%q level=%s\n", c.Redis.Addr, c.Redis.ClusterAddrs, c.Log.Level)
	// Output: addr="" cluster=["redis-0:6379" "redis-1:6379"] level=debug
}

func ExampleLookupProcedure() {
	for _, path := range []string{
		"/svc.v1.EnvironmentService/WatchEnvironment",
		"/svc.v1.OrganizationService/CreateProject",
		"/svc.v1.OrganizationService/Nope",
	} {
		p, ok := config.LookupProcedure(path)
		fmt.Println(path, ok, p.Streaming())
	}
	// Output:
	// /svc.v1.EnvironmentService/WatchEnvironment true true
	// /svc.v1.OrganizationService/CreateProject true false
	// /svc.v1.OrganizationService/Nope false false
}

func ExampleDefaultOperations() {
	for _, op := range config.DefaultOperations()[:3] {
		fmt.Println(op.Procedure, op.ServiceAccountRoles, op.Idempotent)
	}
	// Output:
	// /svc.v1.BlueprintService/SearchCatalog [svc-admin svc-env-manager svc-viewer] false
	// /svc.v1.BlueprintService/ValidateBlueprint [svc-admin svc-env-manager] false
	// /svc.v1.EnvironmentService/CreateEnvironment [svc-admin svc-env-manager] true
}

func ExampleParseByteSize() {
	for _, s := range []string{"4MiB", "64 KiB", "1GB", "4mb"} {
		n, err := config.ParseByteSize(s)
		fmt.Println(int64(n), n, err)
	}
	// Output:
	// 4194304 4MiB <nil>
	// 65536 64KiB <nil>
	// 1000000000 1000000000B <nil>
	// 0 0B invalid byte size "4mb": unknown unit "mb" (use B, KB, MB, GB, KiB, MiB or GiB)
}

func ExampleLimits_PlanFor() {
	l := config.Default().Limits
	l.SubjectPlans = map[string]string{"alice": "pro"}
	for _, call := range []struct{ claim, subject string }{
		{"Enterprise", "alice"}, // the token's claim first, lowercased
		{"", "alice"},           // then the subject's override
		{"gold", "bob"},         // then the default: gold is no plan
	} {
		name, plan := l.PlanFor(call.claim, call.subject)
		fmt.Println(name, plan.RequestsPerMinute, l.QuotasFor(call.subject, name).ConcurrentEnvironments)
	}
	// Output:
	// enterprise 1000 0
	// pro 300 0
	// free 60 2
}
