package identity

import "strings"

// accessTokenHeaderTypes are the JOSE header typ values of an access token:
// RFC 9068's at+jwt (in full or short), and the generic JWT that Keycloak
// and most issuers write on every token they sign. Any other declared type
// (an ID token's id_token+jwt, logout+jwt, secevent+jwt, dpop+jwt, …) is not
// an access token.
var accessTokenHeaderTypes = []string{"at+jwt", "application/at+jwt", "jwt"}

// checkAccessToken refuses a token its issuer marks as something other than
// an access token: by the JOSE header's typ (RFC 9068), or by the typ claim
// with which Keycloak tells its token types apart ("Bearer" for an access
// token; "ID", "Refresh", "Logout", … for the others). A token that marks
// nothing passes: then only the audience keeps an ID token out (its aud is
// the client that asked for it, not the API).
func checkAccessToken(headerType string, claims map[string]any) *Error {
	if headerType != "" && !containsFold(accessTokenHeaderTypes, headerType) {
		return &Error{Reason: ReasonTokenInvalid, Message: "not an access token: header typ is " + clip(headerType)}
	}
	switch typ := claims["typ"].(type) {
	case nil:
	case string:
		if !strings.EqualFold(typ, "Bearer") {
			return &Error{Reason: ReasonTokenInvalid, Message: "not an access token: typ claim is " + clip(typ)}
		}
	default:
		return &Error{Reason: ReasonTokenInvalid, Message: "not an access token: typ claim is not a string"}
	}
	return nil
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(e, s) {
			return true
		}
	}
	return false
}

// clip bounds a token-supplied string quoted in a message.
func clip(s string) string {
	const max = 32
	if len(s) > max {
		s = s[:max] + "…"
	}
	return `"` + strings.ToValidUTF8(s, "?") + `"`
}
