package testkit

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/testenv"
)

// Browser is a headless Chromium (Debian's package) driven through the
// DevTools protocol over a pipe (--remote-debugging-pipe: JSON messages
// ended by a NUL byte on file descriptors 3 and 4), so that a test can
// load a page, let its scripts run, read its DOM and click, as a user
// would. Without chromium on PATH the test skips (fails under CI=true).
type Browser struct {
	t   testing.TB
	out *os.File // to Chromium

	mu      sync.Mutex
	next    int
	pending map[int]chan cdpReply
	dead    error
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// cdpTimeout bounds one protocol command: a hung browser fails the test.
const cdpTimeout = time.Minute

// StartChromium starts a headless Chromium for the test and stops it when
// the test ends.
func StartChromium(t testing.TB) *Browser {
	t.Helper()
	path := testenv.Command(t, "chromium")
	toChrome, out, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	in, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, path, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--disable-dev-shm-usage", "--window-size=1400,1000",
		"--user-data-dir="+t.TempDir(), "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	toChrome.Close()
	fromChrome.Close()
	b := &Browser{t: t, out: out, pending: map[int]chan cdpReply{}}
	done := make(chan struct{})
	go b.read(in, done)
	t.Cleanup(func() {
		out.Close()
		cancel()
		_ = cmd.Wait()
		<-done
		in.Close()
		if t.Failed() {
			t.Logf("chromium's stderr:\n%.4000s", stderr.String())
		}
	})
	return b
}

func (b *Browser) read(in *os.File, done chan struct{}) {
	defer close(done)
	r := bufio.NewReader(in)
	for {
		msg, err := r.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			b.dead = fmt.Errorf("chromium's pipe: %w", err)
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		var m struct {
			ID int `json:"id"`
			cdpReply
		}
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == 0 {
			continue // an event
		}
		b.mu.Lock()
		ch := b.pending[m.ID]
		delete(b.pending, m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m.cdpReply
		}
	}
}

// call sends one command (to a page's session, or to the browser when
// session is "") and decodes its result into out (if not nil).
func (b *Browser) call(session, method string, params any, out any) error {
	b.mu.Lock()
	if b.dead != nil {
		b.mu.Unlock()
		return b.dead
	}
	b.next++
	id := b.next
	ch := make(chan cdpReply, 1)
	b.pending[id] = ch
	msg := map[string]any{"id": id, "method": method, "params": params}
	if session != "" {
		msg["sessionId"] = session
	}
	data, _ := json.Marshal(msg)
	_, err := b.out.Write(append(data, 0))
	b.mu.Unlock()
	if err != nil {
		return fmt.Errorf("%s: %w", method, err)
	}
	select {
	case r, ok := <-ch:
		switch {
		case !ok:
			return fmt.Errorf("%s: chromium went away", method)
		case r.Error != nil:
			return fmt.Errorf("%s: %s", method, r.Error.Message)
		case out != nil:
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-time.After(cdpTimeout):
		return fmt.Errorf("%s: no answer from chromium in %v", method, cdpTimeout)
	}
}

// Page is one tab of the Browser.
type Page struct {
	b       *Browser
	session string
}

// NewPage opens a tab that sends header (e.g. Authorization) with each of
// its requests.
func (b *Browser) NewPage(header map[string]string) *Page {
	b.t.Helper()
	var target struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call("", "Target.createTarget", map[string]any{"url": "about:blank"}, &target); err != nil {
		b.t.Fatal(err)
	}
	var attached struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call("", "Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached); err != nil {
		b.t.Fatal(err)
	}
	p := &Page{b: b, session: attached.SessionID}
	for _, m := range []string{"Page.enable", "Runtime.enable", "Network.enable"} {
		if err := b.call(p.session, m, map[string]any{}, nil); err != nil {
			b.t.Fatal(err)
		}
	}
	if len(header) > 0 {
		if err := b.call(p.session, "Network.setExtraHTTPHeaders", map[string]any{"headers": header}, nil); err != nil {
			b.t.Fatal(err)
		}
	}
	return p
}

// Navigate loads url in the tab and returns once the navigation is
// committed (the page's scripts may still be running: wait with WaitFor).
func (p *Page) Navigate(url string) {
	p.b.t.Helper()
	if failed := p.TryNavigate(url); failed != "" {
		p.b.t.Fatalf("navigate to %s: %s", url, failed)
	}
}

// TryNavigate is Navigate for a page that may not load: it returns why
// the browser did not load it (net::ERR_…), "" when it did.
func (p *Page) TryNavigate(url string) string {
	p.b.t.Helper()
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.b.call(p.session, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		p.b.t.Fatal(err)
	}
	return nav.ErrorText
}

// Eval runs the JavaScript expression in the page (awaiting a promise)
// and decodes its value into out.
func (p *Page) Eval(expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.b.call(p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("%s: %s %s", expr, r.Exception.Text, r.Exception.Exception.Description)
	}
	if out == nil || len(r.Result.Value) == 0 {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// Text returns the text of the page's element that the CSS selector
// names ("" when there is none).
func (p *Page) Text(selector string) string {
	p.b.t.Helper()
	sel, _ := json.Marshal(selector)
	var s string
	if err := p.Eval(fmt.Sprintf("(document.querySelector(%s) || {innerText: ''}).innerText", sel), &s); err != nil {
		p.b.t.Fatal(err)
	}
	return s
}

// Click clicks the element that the CSS selector names, as a user would.
func (p *Page) Click(selector string) {
	p.b.t.Helper()
	sel, _ := json.Marshal(selector)
	if err := p.Eval(fmt.Sprintf("document.querySelector(%s).click()", sel), nil); err != nil {
		p.b.t.Fatal(err)
	}
}

// WaitText polls the text of the element that selector names (WaitFor's
// way) until ok accepts it, and returns that text.
func (p *Page) WaitText(selector, what string, ok func(string) bool) string {
	p.b.t.Helper()
	deadline := time.Now().Add(waitBound)
	for {
		text := p.Text(selector)
		if ok(text) {
			return text
		}
		if time.Now().After(deadline) {
			p.b.t.Fatalf("still not true after %v: %s; %s reads:\n%s", waitBound, what, selector, text)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
