package apierror

// RewriteJSON is rewriteJSON without the decoded error: the reshaping of
// detail types alone, which the tests and the benchmark check apart from
// ShapeJSON's own answers.
func RewriteJSON(body []byte) (out []byte, ok bool) {
	out, _, ok = rewriteJSON(body)
	return out, ok
}
