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
// body": a JSON call with an empty body (Content-Length 0, or no body at
// all) is the empty request, and one without Content-Type (classify lets
// it through for GetUsage alone) is HTTP/JSON. connect-go's handler wants
// a JSON object and a Content-Type, so it is given both.
func (s *Step) Serve(w *call.Recorder, r *http.Request, c wire.Call, p *identity.Principal, admitted *limits.Admission) {
	w.AnswersItself()
	r = r.WithContext(context.WithValue(r.Context(), usageKey{}, &usageCall{p, admitted, w.End}))
	if c.UnaryConnect && c.JSON && r.Method == http.MethodPost && r.ContentLength == 0 {
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
