package deploy_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
)

// dockerfileLdflags returns the -ldflags of the Dockerfile's go build, with
// the VERSION build argument set to version.
func dockerfileLdflags(t *testing.T, dockerfile, version string) string {
	t.Helper()
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`-ldflags="([^"]*)"`).FindStringSubmatch(string(data))
	if m == nil {
		t.Fatalf("%s: no -ldflags=\"…\" in its go build", dockerfile)
	}
	return strings.ReplaceAll(m[1], "${VERSION}", version)
}

// dockerfileTags returns the -tags of the Dockerfile's go build ("" when
// it sets none).
func dockerfileTags(t *testing.T, dockerfile string) string {
	t.Helper()
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	if m := regexp.MustCompile(`go build [^\n]*-tags[ =]([^ ]+)`).FindStringSubmatch(string(data)); m != nil {
		return m[1]
	}
	return ""
}

// buildWithLdflags builds a command of this module as the Dockerfile does
// (its -tags too).
func buildWithLdflags(t *testing.T, cmd, dockerfile, ldflags string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(cmd))
	build := exec.Command(goTool(), "build", "-trimpath", "-tags", dockerfileTags(t, dockerfile), "-ldflags", ldflags, "-o", bin, "github.com/orgedge/edge/"+cmd)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", cmd, err, out)
	}
	return bin
}

// TestImagesStampTheVersionTheyAreBuiltWith builds both binaries with their
// Dockerfile's -ldflags and a VERSION, and checks that -version says it and
// that the running edge's edge_build_info carries it.
func TestImagesStampTheVersionTheyAreBuiltWith(t *testing.T) {
	t.Parallel()
	const version = "v9.8.7-rc.1"
	bins := map[string]string{}
	for cmd, dockerfile := range map[string]string{"cmd/edge": "edge.Dockerfile", "cmd/orgsvc": "orgsvc.Dockerfile"} {
		bin := buildWithLdflags(t, cmd, dockerfile, dockerfileLdflags(t, dockerfile, version))
		bins[cmd] = bin
		out, err := exec.Command(bin, "-version").CombinedOutput()
		if want := filepath.Base(cmd) + " " + version + "\n"; err != nil || string(out) != want {
			t.Errorf("%s -version: %q, %v; want %q", cmd, out, err, want)
		}
	}

	apiAddr, adminAddr := freeAddr(t), freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	edge := exec.CommandContext(ctx, bins["cmd/edge"], "-config", "edge.image.yaml")
	edge.Env = []string{
		"EDGE_LISTEN_ADDR=" + apiAddr, "EDGE_ADMIN_ADDR=" + adminAddr,
		"EDGE_UPSTREAM_URL=http://127.0.0.1:1", "EDGE_OIDC_ISSUER_URL=http://127.0.0.1:1/realms/x", "EDGE_OIDC_AUDIENCE=api",
		"EDGE_REDIS_ADDR=127.0.0.1:1", // as the URLs, the deployer's to give (compose, k8s)
		"OTEL_SDK_DISABLED=true",
	}
	var logs lockedBuffer
	edge.Stdout, edge.Stderr = &logs, &logs
	if err := edge.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); _ = edge.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	for httpStatus("http://"+adminAddr+"/healthz") != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatalf("the edge did not start:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	res, err := http.Get("http://" + adminAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	found := false
	sc := bufio.NewScanner(io.LimitReader(res.Body, 4<<20))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		found = found || sc.Text() == `edge_build_info{version="`+version+`"} 1`
	}
	if !found {
		t.Fatalf("no edge_build_info{version=%q} 1 in /metrics", version)
	}
}

func TestComposeStampsTheImagesWithEdgeVersion(t *testing.T) {
	p := loadCompose(t)
	for name := range builtFromSources {
		s := service(t, p, name)
		if s.Build == nil || s.Build.Args["VERSION"] == nil || *s.Build.Args["VERSION"] != "dev" {
			t.Errorf("%s: build args %v, want VERSION from EDGE_VERSION (default dev)", name, s.Build.Args)
		}
		if tag := s.Image[strings.LastIndex(s.Image, ":")+1:]; tag != "dev" {
			t.Errorf("%s: image %s, want the tag EDGE_VERSION (default dev) too", name, s.Image)
		}
	}
}

// TestEdgeImageListensEverywhereFromItsFileAndSetsNoAddressVariables: the
// image's own file makes the edge reachable in a container, and the image
// sets no EDGE_LISTEN_ADDR or EDGE_ADMIN_ADDR, which would override the
// addresses of a file mounted in its place.
func TestEdgeImageListensEverywhereFromItsFileAndSetsNoAddressVariables(t *testing.T) {
	data, err := os.ReadFile("edge.Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	for _, v := range []string{"EDGE_LISTEN_ADDR", "EDGE_ADMIN_ADDR"} {
		for _, line := range strings.Split(df, "\n") {
			if !strings.HasPrefix(strings.TrimSpace(line), "#") && strings.Contains(line, v) {
				t.Errorf("edge.Dockerfile sets %s: %q", v, line)
			}
		}
	}
	if !strings.Contains(df, "COPY deploy/edge.image.yaml /etc/edge/edge.yaml") {
		t.Error("edge.Dockerfile does not copy deploy/edge.image.yaml to /etc/edge/edge.yaml")
	}
	ignore, err := os.ReadFile("edge.Dockerfile.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(ignore), "!deploy/edge.image.yaml") {
		t.Error("edge.Dockerfile.dockerignore leaves deploy/edge.image.yaml out of the build context")
	}
	if !strings.Contains(df, `"-healthcheck", "http://127.0.0.1:9090/healthz"`) {
		t.Error("the image's HEALTHCHECK must probe /healthz: /readyz would make an orchestrator restart every replica during a Redis outage under fail_closed")
	}
	file, err := os.ReadFile("edge.image.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// What an operator of the image sets: the two URLs, the audience and
	// the Redis address.
	vars := map[string]string{
		"EDGE_UPSTREAM_URL": "http://orgsvc:8082", "EDGE_OIDC_ISSUER_URL": "https://id.example.com/realms/x",
		"EDGE_OIDC_AUDIENCE": "api", "EDGE_REDIS_ADDR": "redis:6379",
	}
	cfg, err := config.LoadData("edge.image.yaml", file, func(n string) string { return vars[n] })
	if err != nil {
		t.Fatalf("edge.image.yaml with the two URLs, the audience and the Redis address: %v", err)
	}
	if cfg.Listen.Addr != ":8080" || cfg.Admin.Addr != ":9090" {
		t.Errorf("edge.image.yaml listens on %q, admin %q; want :8080 and :9090", cfg.Listen.Addr, cfg.Admin.Addr)
	}
}

// developmentOnly are the packages and modules only `edge -dev` needs: the
// backend, its databases' drivers, the development issuer and the embedded
// Redis. The production image must link none of them.
var developmentOnly = []string{
	"github.com/orgedge/edge/orgsvc",
	"github.com/orgedge/edge/devissuer",
	"modernc.org/sqlite",
	"github.com/jackc/pgx",
	"github.com/alicebob/miniredis",
}

// TestEdgeImageLinksNoDevelopmentPackageAndItsDevSaysSo builds the edge as
// edge.Dockerfile does and checks, in the packages the build compiles
// (go list -deps with the Dockerfile's tags) and in the modules the binary
// records (go version -m), that no development package is in it; and that
// the binary's -dev fails, saying why and what to run instead.
func TestEdgeImageLinksNoDevelopmentPackageAndItsDevSaysSo(t *testing.T) {
	t.Parallel()
	tags := dockerfileTags(t, "edge.Dockerfile")
	list := exec.Command(goTool(), "list", "-deps", "-tags", tags, "github.com/orgedge/edge/cmd/edge")
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	deps, err := list.Output()
	if err != nil {
		t.Fatalf("go list -deps -tags %q ./cmd/edge: %v", tags, err)
	}
	bin := buildWithLdflags(t, "cmd/edge", "edge.Dockerfile", dockerfileLdflags(t, "edge.Dockerfile", "v0.0.0-test"))
	modules, err := exec.Command(goTool(), "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	for _, dev := range developmentOnly {
		for _, p := range strings.Fields(string(deps)) {
			if p == dev || strings.HasPrefix(p, dev+"/") {
				t.Errorf("the image's edge (go build -tags %q) compiles %s, a development package", tags, p)
			}
		}
		for _, line := range strings.Split(string(modules), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "dep" && (f[1] == dev || strings.HasPrefix(f[1], dev+"/")) {
				t.Errorf("the image's edge binary links the module %s (go version -m)", f[1])
			}
		}
	}

	if t.Failed() {
		// A binary with the development mode would start it on its fixed
		// ports (8080, 9090, ...), in the way of whatever runs there.
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dev := exec.CommandContext(ctx, bin, "-dev")
	dev.Env = []string{"OTEL_SDK_DISABLED=true"}
	out, err := dev.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("the image's edge -dev: %v, want a non-zero exit; output:\n%s", err, out)
	}
	if want := "built without the development mode"; !strings.Contains(string(out), want) || !strings.Contains(string(out), "go run ./cmd/edge -dev") {
		t.Errorf("the image's edge -dev says %q; want it to say it is %s and to name go run ./cmd/edge -dev", out, want)
	}
}
