package deploy_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/internal/testenv"
	"github.com/orgedge/edge/internal/testkit"
)

// redisCLI is how every command of the docs reaches Redis: the address from
// REDIS_ADDR, the password from REDISCLI_AUTH, an error answer as a
// non-zero status.
const redisCLI = `redis-cli -e -u "redis://$REDIS_ADDR" `

// redisDocCommands returns the redis-cli commands of docs/operations.md:
// the lines of its code blocks, and its inline code, that start with
// redis-cli, each once.
func redisDocCommands(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var cmds []string
	add := func(c string) {
		if c = strings.TrimSpace(c); strings.HasPrefix(c, "redis-cli ") && !seen[c] {
			seen[c] = true
			cmds = append(cmds, c)
		}
	}
	span := regexp.MustCompile("`([^`]+)`")
	var para []string // the prose lines of a paragraph, whose spans may wrap
	flush := func() {
		for _, m := range span.FindAllStringSubmatch(strings.Join(para, " "), -1) {
			add(m[1])
		}
		para = para[:0]
	}
	for line := range strings.Lines(string(doc)) {
		switch {
		case strings.HasPrefix(line, "    "):
			add(line)
		case strings.TrimSpace(line) == "":
			flush()
		default:
			para = append(para, strings.TrimSpace(line))
		}
	}
	flush()
	return cmds
}

// TestRedisRunbookCommandsRunAsPrinted runs every redis-cli command of
// docs/operations.md as printed, in bash after the docs' `set -o pipefail`,
// with REDIS_ADDR and REDISCLI_AUTH naming a redis-server of the test's
// own that requires a password: each succeeds, and the counts count the
// keys there. Against an address where nothing listens, and with
// a wrong password, each fails: a non-zero status, the reason on stderr,
// and no count that would read as "no keys".
func TestRedisRunbookCommandsRunAsPrinted(t *testing.T) {
	tool(t, "redis-cli")
	cmds := redisDocCommands(t)
	if len(cmds) < 8 {
		t.Fatalf("docs/operations.md has %d redis-cli commands: %q", len(cmds), cmds)
	}
	for _, c := range cmds {
		if strings.Count(c, "redis-cli ") != strings.Count(c, redisCLI) {
			t.Errorf("%s\n  reaches Redis otherwise than through %s… (its address and password as variables, errors as a status)", c, redisCLI)
		}
		if strings.Contains(c, "| wc -l") && !strings.HasPrefix(c, redisCLI+"ping >/dev/null && ") {
			t.Errorf("%s\n  counts without a PING first: a Redis out of reach prints 0", c)
		}
	}

	const password = "runbook-s3cret"
	rs := testenv.StartRedisProcess(t, testenv.RedisProcessOptions{
		Args: func(port int, dir string) []string {
			return []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir, "--requirepass", password}
		},
		Ping: func(ctx context.Context, addr string) error {
			c := redis.NewClient(&redis.Options{Addr: addr, Password: password, MaxRetries: -1, DialTimeout: time.Second})
			defer c.Close()
			return c.Ping(ctx).Err()
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc := redis.NewClient(&redis.Options{Addr: rs.Addr, Password: password})
	defer rc.Close()
	keys := map[string]int{"edge:idem:": 3, "edge:rl:": 2, "edge:q:": 1}
	for prefix, n := range keys {
		for i := range n {
			if err := rc.Set(ctx, prefix+"{t}:"+strconv.Itoa(i), "x", time.Hour).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}

	run := func(cmd, addr, auth string) (stdout, stderr string, err error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var o, e bytes.Buffer
		c := exec.CommandContext(ctx, "bash", "-c", "set -o pipefail\n"+cmd)
		c.Env = append(os.Environ(), "REDIS_ADDR="+addr, "REDISCLI_AUTH="+auth)
		c.Stdout, c.Stderr = &o, &e
		err = c.Run()
		return o.String(), e.String(), err
	}
	count := regexp.MustCompile(`(?m)^\s*\d+\s*$`)
	dead := testkit.DeadAddr(t)
	for _, c := range cmds {
		out, errOut, err := run(c, rs.Addr, password)
		if err != nil {
			t.Errorf("%s\n  against the test's Redis: %v, stdout %q, stderr %q", c, err, out, errOut)
		}
		for prefix, n := range keys {
			if strings.HasSuffix(c, "--pattern '"+prefix+"*' | wc -l") && strings.TrimSpace(out) != strconv.Itoa(n) {
				t.Errorf("%s\n  counted %q, want %d", c, out, n)
			}
		}
		for name, env := range map[string][2]string{"nothing listens": {dead, password}, "a wrong password": {rs.Addr, "wrong-" + password}} {
			out, errOut, err := run(c, env[0], env[1])
			if err == nil || strings.TrimSpace(errOut) == "" || count.MatchString(out) {
				t.Errorf("%s\n  where %s: %v (want a failure), stdout %q, stderr %q", c, name, err, out, errOut)
			}
		}
	}
}
