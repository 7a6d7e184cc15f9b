package bodydeadline_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/orgedge/edge/internal/bodydeadline"
)

// A proxy's transport may read a stream's request body after the handler
// returned (the client reset the stream, the handler ended, the transport's
// writer still reads). That read must not touch the finished call's
// ResponseWriter: HTTP/2's dereferences a nil stream, a panic in a goroutine
// of the transport, which ends the whole process.
func TestBodyReadAfterTheHandlerEndedChangesNoDeadline(t *testing.T) {
	bodies := make(chan io.Reader, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b := bodydeadline.Stream(w, r, time.Minute)
		defer b.End()
		bodies <- r.Body // read later, as a proxy's transport does
		w.WriteHeader(http.StatusOK)
	}))
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &h2c
	srv.Start()
	defer srv.Close()

	body, send := io.Pipe()
	defer send.Close()
	req, err := http.NewRequest(http.MethodPost, srv.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/grpc")
	c := &http.Client{Transport: &http.Transport{Protocols: &h2c}}
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, res.Body) // the handler has ended
	_ = res.Body.Close()

	// The read fails (the stream is over) and, before End, cleared the
	// deadline of a ResponseWriter whose stream was gone: a panic.
	if _, err := (<-bodies).Read(make([]byte, 8)); err == nil {
		t.Error("a read of a finished stream's body succeeded")
	}
}
