package usage

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/orgedge/edge/edge/apierror"
	"github.com/orgedge/edge/edge/call"
	"github.com/orgedge/edge/edge/limits"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/identity"
)

// Serve answers GetUsage for the caller p, admitted by the limit step as
// a; w records the call, and the refusals GetUsage answers (End). A JSON caller's error is reshaped as the
// backend's are (edge/forward): connect-go's handler writes Connect's
// JSON error, without the "@type" fields every other error of the API
// carries.
//
// GetUsage's request has no fields, and the specification's row says "no
// body": a JSON call with an empty body (Content-Length 0, no body at all,
// or an empty one of no declared length) is the empty request, and one
// without Content-Type (classify lets it through for GetUsage alone) is
// HTTP/JSON. connect-go's handler wants a JSON object and a Content-Type,
// so it is given both.
func (s *Step) Serve(w *call.Recorder, r *http.Request, c wire.Call, p *identity.Principal, admitted *limits.Admission) {
	w.AnswersItself()
	r = r.WithContext(context.WithValue(r.Context(), usageKey{}, &usageCall{p, admitted, w.End}))
	if c.UnaryConnect && c.JSON && r.Method == http.MethodPost && emptyBody(r) {
		if r.Header.Get("Content-Type") == "" {
			r.Header.Set("Content-Type", "application/json")
		}
		r.Body, r.ContentLength = io.NopCloser(strings.NewReader("{}")), 2
		r.Header.Set("Content-Length", "2")
	}
	if !c.UnaryConnect || !c.JSON {
		s.h.ServeHTTP(w, r)
		return
	}
	a := &bufferedAnswer{header: w.Header()}
	s.h.ServeHTTP(a, r)
	body := a.body.Bytes()
	if a.status != 0 && a.status != http.StatusOK {
		if out, ok := apierror.ShapeJSON(body); ok {
			body = out
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	}
	if a.status != 0 {
		w.WriteHeader(a.status)
	}
	_, _ = w.Write(body)
}

// emptyBody reports whether r's body is empty. A body of no declared
// length (HTTP/2 without content-length, HTTP/1.1 chunked) may be empty
// too: its first byte is read to know, and put back if there is one, with
// the read's error if it failed. connect-go reads the body next anyway,
// and it is bounded in size and time already (edge/reqbody).
func emptyBody(r *http.Request) bool {
	if r.ContentLength >= 0 {
		return r.ContentLength == 0
	}
	var first [1]byte
	n, err := io.ReadFull(r.Body, first[:])
	if n == 0 && err == io.EOF {
		return true
	}
	rest := io.Reader(r.Body)
	if err != nil {
		rest = failedRead{err}
	}
	r.Body = readCloser{io.MultiReader(bytes.NewReader(first[:n]), rest), r.Body}
	return false
}

// failedRead fails every read as the body's first read did.
type failedRead struct{ err error }

func (f failedRead) Read([]byte) (int, error) { return 0, f.err }

// readCloser reads what was put back of a body, and closes the body.
type readCloser struct {
	io.Reader
	io.Closer
}

// bufferedAnswer keeps a small answer (GetUsage's) whole, to reshape it
// before it goes out. Its header map is the client's.
type bufferedAnswer struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *bufferedAnswer) Header() http.Header { return a.header }

func (a *bufferedAnswer) WriteHeader(status int) {
	if a.status == 0 {
		a.status = status
	}
}

func (a *bufferedAnswer) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(b)
}
