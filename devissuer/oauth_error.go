package devissuer

import "net/http"

// oauthError is an error response of the token endpoint, in Keycloak's (and
// RFC 6749 section 5.2's) shape.
type oauthError struct {
	status      int
	code        string
	description string
}

func errInvalidRequest(description string) *oauthError {
	return &oauthError{http.StatusBadRequest, "invalid_request", description}
}

// errUnauthorizedClient is 401 for a client that failed to authenticate and
// 400 for a known client asking for a grant it may not use, as Keycloak does.
func errUnauthorizedClient(status int, description string) *oauthError {
	return &oauthError{status, "unauthorized_client", description}
}

func (e *oauthError) write(w http.ResponseWriter) {
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, e.status, struct {
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}{e.code, e.description})
}
