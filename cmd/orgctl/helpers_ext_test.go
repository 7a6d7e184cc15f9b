package main_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/devissuer"
	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
	"github.com/orgedge/edge/orgsvc"
)

// raceBuild is set when the tests run with -race: the command is built
// with it too.
var raceBuild bool

// binary is the orgctl command built for this test run.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "orgctl-test-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "orgctl")
	args := []string{"build", "-o", binary}
	if raceBuild {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		_ = os.RemoveAll(dir)
		panic("build orgctl: " + err.Error())
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// stackOptions change the stack a test runs against.
type stackOptions struct {
	tokenTTL       time.Duration        // the issuer's access-token lifetime
	provisionDelay time.Duration        // how long an environment is PROVISIONING
	edge           func(*config.Config) // changes to the edge's configuration
}

// stack is a development issuer, a backend and an edge on loopback, as the
// command meets them in production, with the issuer's token requests counted.
type stack struct {
	issuerURL  string
	issuerBase string // what devissuer.New was given
	backend    *testkit.Backend
	edge       *testkit.Edge

	mu     sync.Mutex
	grants map[string]int // token requests by grant_type
}

func startStack(t *testing.T, o stackOptions) *stack {
	t.Helper()
	st := &stack{grants: map[string]int{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := devissuer.DefaultConfig()
	cfg.DevicePollInterval = time.Second
	if o.tokenTTL > 0 {
		cfg.TokenTTL = o.tokenTTL
	}
	st.issuerBase = "http://" + ln.Addr().String()
	iss, err := devissuer.New(st.issuerBase, cfg)
	if err != nil {
		t.Fatal(err)
	}
	st.issuerURL = iss.URL()
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/protocol/openid-connect/token") {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			form, _ := url.ParseQuery(string(body))
			st.mu.Lock()
			st.grants[form.Get("grant_type")]++
			st.mu.Unlock()
		}
		iss.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	delay := o.provisionDelay
	if delay == 0 {
		delay = time.Second
	}
	st.backend = testkit.StartBackend(t, testkit.SQLite, st.issuerURL, orgsvc.Config{ProvisionDelay: delay, WatchPoll: 100 * time.Millisecond})
	ecfg := testkit.EdgeConfig(t, st.backend.URL, st.issuerURL)
	if o.edge != nil {
		o.edge(ecfg)
	}
	st.edge = testkit.StartEdge(t, ecfg)
	return st
}

// tokenRequests returns how many token requests of the grant the issuer got.
func (st *stack) tokenRequests(grant string) int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.grants[grant]
}

// cli runs the built command as one user of one machine: a config
// directory of its own, and the stack's addresses in the environment.
type cli struct {
	t         *testing.T
	configDir string
	env       []string
}

func newCLI(t *testing.T, st *stack, env ...string) *cli {
	t.Helper()
	home := t.TempDir()
	c := &cli{t: t, configDir: filepath.Join(home, ".config")}
	c.env = append([]string{
		"HOME=" + home,
		"XDG_CONFIG_HOME=" + c.configDir,
		"PATH=" + os.Getenv("PATH"),
		"ORGCTL_API=" + st.edge.URL,
		"ORGCTL_ISSUER=" + st.issuerURL,
		"ORGCTL_CLIENT_ID=cli",
	}, env...)
	return c
}

// result is what a run of the command left.
type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return "exit " + strconv.Itoa(r.code) + "\nstdout:\n" + r.stdout + "\nstderr:\n" + r.stderr
}

// run runs orgctl with args and waits for it (at most a minute).
func (c *cli) run(args ...string) result {
	c.t.Helper()
	return c.runWithInput("", args...)
}

func (c *cli) runWithInput(stdin string, args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = c.env
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("orgctl %q: %v", args, err)
	}
	return r
}

// mustRun is run for a command that must succeed.
func (c *cli) mustRun(args ...string) result {
	c.t.Helper()
	r := c.run(args...)
	if r.code != 0 {
		c.t.Fatalf("orgctl %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// login runs `orgctl login` and approves its code on the issuer's page as
// a browser would: the page of the printed link, its form filled in and
// submitted with the Approve button.
func (c *cli) login(username, password string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "login")
	cmd.Env = c.env
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderrPipe, err := cmd.StderrPipe()
	if err != nil {
		c.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	var stderr strings.Builder
	links := make(chan string, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderrPipe)
		sent := false
		for sc.Scan() {
			line := sc.Text()
			stderr.WriteString(line + "\n")
			if l := strings.TrimSpace(line); !sent && strings.HasPrefix(l, "http") {
				links <- l
				sent = true
			}
		}
	}()
	select {
	case link := <-links:
		approve(c.t, link, username, password)
	case <-scanned:
		_ = cmd.Wait()
		c.t.Fatalf("login printed no link:\n%s", stderr.String())
	}
	<-scanned
	err = cmd.Wait()
	r := result{stdout: stdout.String(), stderr: stderr.String()}
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		c.t.Fatalf("login: %v", err)
	}
	return r
}

// approve opens the link, fills in the page's form and presses Approve.
func approve(t *testing.T, link, username, password string) {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := browser.Get(link)
	if err != nil {
		t.Fatalf("open %s: %v", link, err)
	}
	doc, err := html.Parse(resp.Body)
	_ = resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("page %s: HTTP %d, %v", link, resp.StatusCode, err)
	}
	form := findForm(doc)
	if form == nil {
		t.Fatalf("page %s has no form", link)
	}
	values := url.Values{}
	var action, method string
	for _, a := range form.Attr {
		switch a.Key {
		case "action":
			action = a.Val
		case "method":
			method = strings.ToUpper(a.Val)
		}
	}
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "input" {
			name, value := attr(n, "name"), attr(n, "value")
			switch name {
			case "username":
				value = username
			case "password":
				value = password
			}
			if name != "" {
				values.Set(name, value)
			}
		}
		if n.Type == html.ElementNode && n.Data == "button" && strings.Contains(strings.ToLower(text(n)), "approve") {
			values.Set(attr(n, "name"), attr(n, "value"))
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(form)
	if method != http.MethodPost || values.Get("user_code") == "" {
		t.Fatalf("form: method %q, fields %v", method, values)
	}
	base, _ := url.Parse(link)
	target, err := base.Parse(action)
	if err != nil {
		t.Fatal(err)
	}
	resp, err = browser.PostForm(target.String(), values)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "approved") {
		t.Fatalf("approval: HTTP %d\n%s", resp.StatusCode, body)
	}
}

func findForm(n *html.Node) *html.Node {
	if n.Type == html.ElementNode && n.Data == "form" {
		return n
	}
	for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
		if f := findForm(ch); f != nil {
			return f
		}
	}
	return nil
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			walk(ch)
		}
	}
	walk(n)
	return b.String()
}

// jq runs jq with the filter on input; under CI=true a missing jq fails.
func jq(t *testing.T, filter, input string) string {
	t.Helper()
	if _, err := exec.LookPath("jq"); err != nil {
		if testenv.InCI() {
			t.Fatal("jq is required under CI=true (scripts/test installs it)")
		}
		t.Skip("no jq on PATH")
	}
	cmd := exec.CommandContext(t.Context(), "jq", "-r", filter)
	cmd.Stdin = strings.NewReader(input)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("jq %s: %v\ninput:\n%s", filter, err, input)
	}
	return strings.TrimSpace(string(out))
}
