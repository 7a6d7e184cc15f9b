package wire_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"net/http"
	"net/textproto"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/orgedge/edge/edge/idempotency"
	"github.com/orgedge/edge/edge/wire"
	"github.com/orgedge/edge/internal/backendapi"
)

// HeaderValue answers as http.Header.Get for a canonical key, present,
// repeated or absent.
func TestHeaderValueIsGetForACanonicalKey(t *testing.T) {
	h := http.Header{}
	h.Add("content-type", "application/json")
	h.Add("Grpc-Status", "0")
	h.Add("Grpc-Status", "13")
	for _, key := range []string{"Content-Type", "Grpc-Status", "X-Request-Id"} {
		if got, want := wire.HeaderValue(h, key), h.Get(key); got != want {
			t.Errorf("HeaderValue(%q) = %q, h.Get says %q", key, got, want)
		}
	}
}

// Every key the module passes to HeaderValue is canonical, as are the
// header-name constants it indexes headers with: a key that is not would
// never be found. (Literal keys indexing an http.Header directly are
// staticcheck's SA1008.)
func TestHeaderValueKeysAreCanonical(t *testing.T) {
	constants := map[string]string{
		"backendapi.EndedHeader":     backendapi.EndedHeader,
		"backendapi.EndedMoreHeader": backendapi.EndedMoreHeader,
		"idempotency.HeaderKey":      idempotency.HeaderKey,
	}
	for name, key := range constants {
		if c := textproto.CanonicalMIMEHeaderKey(key); c != key {
			t.Errorf("%s = %q, not canonical (%q)", name, key, c)
		}
	}
	root := filepath.Join("..", "..")
	calls := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "gen" || d.Name() == "node_modules" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 2 {
				return true
			}
			switch fn := call.Fun.(type) {
			case *ast.Ident:
				ok = fn.Name == "HeaderValue"
			case *ast.SelectorExpr:
				ok = fn.Sel.Name == "HeaderValue"
			default:
				ok = false
			}
			if !ok {
				return true
			}
			calls++
			var key string
			switch arg := call.Args[1].(type) {
			case *ast.BasicLit:
				key, _ = strconv.Unquote(arg.Value)
			case *ast.SelectorExpr:
				pkg, _ := arg.X.(*ast.Ident)
				if pkg == nil {
					t.Errorf("%s: HeaderValue with a key that is neither a literal nor a known constant", path)
					return true
				}
				name := pkg.Name + "." + arg.Sel.Name
				if key, ok = constants[name]; !ok {
					t.Errorf("%s: HeaderValue with %s: name the constant in this test", path, name)
					return true
				}
			default:
				t.Errorf("%s: HeaderValue with a key that is neither a literal nor a known constant", path)
				return true
			}
			if c := textproto.CanonicalMIMEHeaderKey(key); c != key {
				t.Errorf("%s: HeaderValue(_, %q): not canonical (%q), never found", path, key, c)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls < 10 {
		t.Fatalf("found %d calls of HeaderValue: the walk missed the module's code", calls)
	}
}
