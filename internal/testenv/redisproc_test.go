package testenv_test

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/testenv"
)

// A killed redis-server's port refuses connections until Restart, and is
// the test's meanwhile: the restarted server binds it again, while it is
// held, and answers.
func TestAKilledRedisKeepsItsPortUntilRestart(t *testing.T) {
	p := testenv.StartRedisProcess(t, testenv.RedisProcessOptions{})
	p.Kill()
	if c, err := net.Dial("tcp", p.Addr); !errors.Is(err, syscall.ECONNREFUSED) {
		if c != nil {
			_ = c.Close()
		}
		t.Fatalf("dial %s after Kill: %v, want connection refused", p.Addr, err)
	}
	// The port is bound: a socket without SO_REUSEADDR cannot have it,
	// and the kernel skips it for every bind of port 0.
	if err := bindPlain(p.Port); !errors.Is(err, syscall.EADDRINUSE) {
		t.Fatalf("bind port %d after Kill: %v, want address in use (the port held)", p.Port, err)
	}
	p.Restart()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.Addr)
	if err != nil {
		t.Fatalf("dial %s after Restart: %v", p.Addr, err)
	}
	defer c.Close()
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := c.Read(buf); err != nil || string(buf) != "+PONG\r\n" {
		t.Fatalf("PING after Restart: %q, %v", buf, err)
	}
}

// bindPlain binds a socket without options to 127.0.0.1:port.
func bindPlain(port int) error {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	return syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}, Port: port})
}
