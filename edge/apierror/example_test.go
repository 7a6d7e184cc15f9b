package apierror_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"

	"connectrpc.com/connect"

	"github.com/orgedge/edge/edge/apierror"
)

func ExampleWrite() {
	err := apierror.New(connect.CodePermissionDenied, "MISSING_ROLE", "this call needs the svc-admin role",
		apierror.WithMetadata("required_roles", "svc-admin"))

	// A plain HTTP/JSON caller.
	req := httptest.NewRequest(http.MethodPost, "/svc.v1.OrganizationService/DeleteOrganization", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	apierror.Write(rec, req, err)

	fmt.Println(rec.Code, rec.Header().Get("Content-Type"))
	fmt.Println(rec.Body)
	// Output:
	// 403 application/json
	// {"code":"permission_denied","message":"this call needs the svc-admin role","details":[{"type":"google.rpc.ErrorInfo","value":"CgxNSVNTSU5HX1JPTEUSBGVkZ2UaGwoOcmVxdWlyZWRfcm9sZXMSCXN2Yy1hZG1pbg","@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"MISSING_ROLE","domain":"edge","metadata":{"required_roles":"svc-admin"}}]}
}

func ExampleRewriteJSON() {
	// What connect-go writes for an error with a RetryInfo of 3s.
	backend := `{"code":"unavailable","message":"try later","details":[{"type":"google.rpc.RetryInfo","value":"CgIIAw","debug":{"retryDelay":"3s"}}]}`

	out, ok := apierror.RewriteJSON([]byte(backend))
	fmt.Println(ok)
	fmt.Println(string(out))
	// Output:
	// true
	// {"code":"unavailable","message":"try later","details":[{"type":"google.rpc.RetryInfo","value":"CgIIAw","@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"3s"}]}
}
