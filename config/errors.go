package config

import (
	"fmt"
	"strings"
)

// fieldError is one problem with the configuration. path is the YAML path
// of the field at fault ("operations[3].procedure"); line, when known, is
// where the file sets it.
type fieldError struct {
	line int
	path string
	msg  string
}

func (e *fieldError) Error() string {
	var b strings.Builder
	if e.line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.line)
	}
	if e.path != "" {
		b.WriteString(e.path)
		b.WriteString(": ")
	}
	b.WriteString(e.msg)
	return b.String()
}

// problems collects every fieldError found, in a stable order, so that an
// operator fixes a file in one round instead of one error per restart.
type problems []*fieldError

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, &fieldError{path: path, msg: fmt.Sprintf(format, args...)})
}

// err returns nil when there are no problems.
func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	return p
}

func (p problems) Error() string {
	if len(p) == 1 {
		return p[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d problems:", len(p))
	for _, e := range p {
		b.WriteString("\n  ")
		b.WriteString(e.Error())
	}
	return b.String()
}

// Unwrap lets errors.Is and errors.As see each problem.
func (p problems) Unwrap() []error {
	errs := make([]error, len(p))
	for i, e := range p {
		errs[i] = e
	}
	return errs
}
