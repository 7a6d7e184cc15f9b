package orgsvc

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/orgedge/edge/internal/bodydeadline"
)

// reasonBodyTimeout: the request body did not arrive in time.
const reasonBodyTimeout = "REQUEST_BODY_TIMEOUT"

// boundBodies gives every call d to deliver its whole request body, from
// its headers: a client (or an edge forwarding one) that sends slowly
// cannot hold a handler and its connection for longer. The API's streams
// send one request message and close, so one bound covers every call. The
// caller gets deadline_exceeded in its protocol.
func boundBodies(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if b := bodydeadline.Unary(w, r, d); b != nil {
			defer b.End()
			r.Body = timeoutBody{b, d, strings.Trim(pathService(r.URL.Path), "/")}
		}
		h.ServeHTTP(w, r)
	})
}

// timeoutBody turns the deadline's error into the connect.Error that
// connect-go's handlers answer as they find it.
type timeoutBody struct {
	*bodydeadline.Body
	d       time.Duration
	service string
}

func (b timeoutBody) Read(p []byte) (int, error) {
	n, err := b.Body.Read(p)
	if errors.Is(err, bodydeadline.ErrTimeout) {
		ce := connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("the request body did not arrive within %s", b.d))
		if d, derr := connect.NewErrorDetail(&errdetails.ErrorInfo{Reason: reasonBodyTimeout, Domain: b.service}); derr == nil {
			ce.AddDetail(d)
		}
		return n, ce
	}
	return n, err
}

var _ io.ReadCloser = timeoutBody{}

// pathService is the service of a procedure path, "/svc.v1.Service/Method".
func pathService(path string) string {
	s, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	return s
}
