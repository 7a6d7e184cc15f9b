package apierror

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/anypb"
)

// MaxRewriteSize is the largest body [ShapeJSON] reshapes. Error bodies
// are small; a proxy need not read more than this (plus one byte, to know
// it is larger) to decide.
const MaxRewriteSize = 64 << 10

// rewriteJSON reshapes a Connect JSON error body, as the backend writes it,
// into the specification's shape: each detail whose type is in the protobuf
// global registry (google.rpc error details always are) keeps its "type" and
// "value" and gains "@type" and the message's fields, exactly as
// protojson.Marshal writes the detail as an Any. The detail's "debug" key,
// connect-go's unofficial JSON copy of the same fields, is dropped from the
// details it reshapes. Everything else stays as it was, in order: other
// keys, and details that are of an unknown type, already reshaped, or whose
// Any form would repeat one of their keys (a google.protobuf.StringValue's
// "value", say).
//
// ok reports whether body is a Connect error body no larger than
// [MaxRewriteSize]: a JSON object with a valid "code" that a Connect client
// decodes. If ok is false, out is body, unchanged. If ok is true, out
// decodes in a Connect client to the same code, message and details as body;
// it is body itself when there was nothing to reshape. e is the error as
// it decoded (ShapeJSON reads it). rewriteJSON never panics.
func rewriteJSON(body []byte) (out []byte, e connectError, ok bool) {
	if len(body) > MaxRewriteSize {
		return body, e, false
	}
	if e, ok = decodeConnectError(body); !ok {
		return body, e, false
	}
	top, ok := parseObject(body)
	if !ok {
		return body, e, false
	}
	i := top.index("details")
	if i < 0 {
		return body, e, true
	}
	var details []json.RawMessage
	if err := json.Unmarshal(top[i].value, &details); err != nil {
		return body, e, false
	}
	reshaped := make([][]byte, len(details))
	changed := false
	for j, raw := range details {
		reshaped[j] = raw
		if d, ok := rewriteDetail(raw); ok {
			reshaped[j], changed = d.marshal(), true
		}
	}
	if !changed {
		return body, e, true
	}
	top[i].value = marshalArray(reshaped)
	return top.marshal(), e, true
}

// connectError is a Connect error body as connect-go's client decodes it.
type connectError struct {
	code         connect.Code
	message      string
	hasErrorInfo bool // a detail of type google.rpc.ErrorInfo
}

// decodeConnectError reports whether a Connect client decodes body as an
// error with a valid code (it decodes as connect-go's client does), and
// returns the error.
func decodeConnectError(body []byte) (connectError, bool) {
	var wire struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []*struct {
			Type  string `json:"type"`
			Value string `json:"value"`
		} `json:"details"`
	}
	var e connectError
	if err := json.Unmarshal(body, &wire); err != nil {
		return e, false
	}
	if err := e.code.UnmarshalText([]byte(wire.Code)); err != nil {
		return e, false
	}
	e.message = wire.Message
	for _, d := range wire.Details {
		if d == nil {
			return e, false
		}
		if _, err := connect.DecodeBinaryHeader(d.Value); err != nil {
			return e, false
		}
		e.hasErrorInfo = e.hasErrorInfo || d.Type == errorInfoType
	}
	return e, true
}

func rewriteDetail(raw []byte) (object, bool) {
	d, ok := parseObject(raw)
	if !ok || d.index("@type") >= 0 {
		return nil, false
	}
	typ, ok := d.str("type")
	if !ok {
		return nil, false
	}
	value, ok := d.str("value")
	if !ok {
		return nil, false
	}
	bin, err := connect.DecodeBinaryHeader(value)
	if err != nil {
		return nil, false
	}
	return withAny(d, typ, bin)
}

// withAny returns detail without "debug" and followed by the members of the
// protobuf JSON form of the Any of typ and value. It fails if the type is
// not registered, the value does not decode, or a member would repeat a key
// of detail: Go's encoding/json, which connect-go's client uses, matches keys
// case-insensitively, so "Value" would be read as "value".
func withAny(detail object, typ string, value []byte) (object, bool) {
	url := typ
	if !strings.Contains(url, "/") {
		url = "type.googleapis.com/" + url
	}
	js, err := protojson.Marshal(&anypb.Any{TypeUrl: url, Value: value})
	if err != nil {
		return nil, false
	}
	fields, ok := parseObject(js)
	if !ok {
		return nil, false
	}
	out := make(object, 0, len(detail)+len(fields))
	seen := make(map[string]struct{}, cap(out))
	for _, m := range detail {
		if m.key != "debug" {
			out = append(out, m)
			seen[foldKey(m.key)] = struct{}{}
		}
	}
	for _, f := range fields {
		if _, dup := seen[foldKey(f.key)]; dup {
			return nil, false
		}
		out = append(out, f)
	}
	return out, true
}

// A member is one key and raw JSON value of an object.
type member struct {
	key   string
	value []byte
}

// An object is a JSON object's members in order, so that rewriting one keeps
// the others as they were.
type object []member

// parseObject parses data, which must be exactly one JSON object with no two
// keys that Go's encoding/json would take for the same.
func parseObject(data []byte) (object, bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	var obj object
	seen := make(map[string]struct{})
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, false
		}
		key, ok := tok.(string)
		if !ok {
			return nil, false
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, false
		}
		fk := foldKey(key)
		if _, dup := seen[fk]; dup {
			return nil, false
		}
		seen[fk] = struct{}{}
		obj = append(obj, member{key, value})
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return obj, true
}

// index returns the position of key (exactly), or -1.
func (o object) index(key string) int {
	for i, m := range o {
		if m.key == key {
			return i
		}
	}
	return -1
}

// str returns the value of key if it is a JSON string.
func (o object) str(key string) (string, bool) {
	i := o.index(key)
	if i < 0 {
		return "", false
	}
	var s string
	if err := json.Unmarshal(o[i].value, &s); err != nil {
		return "", false
	}
	return s, true
}

// marshal writes the object compactly (protojson adds random spaces on
// purpose; the output should not vary).
func (o object) marshal() []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(quote(m.key))
		b.WriteByte(':')
		if err := json.Compact(&b, m.value); err != nil {
			b.Write(m.value) // not reached: values come from a decoder
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

func marshalArray(elems [][]byte) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	b.Write(bytes.Join(elems, []byte(",")))
	b.WriteByte(']')
	return b.Bytes()
}

func quote(s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return b
}

// foldKey is the key as Go's encoding/json compares keys: two keys are
// matched to the same field if their foldKeys are equal.
func foldKey(key string) string {
	var b strings.Builder
	for _, r := range key {
		if r < utf8.RuneSelf {
			if 'a' <= r && r <= 'z' {
				r -= 'a' - 'A'
			}
			b.WriteRune(r)
			continue
		}
		// The smallest rune of r's fold set, as encoding/json's foldRune.
		for {
			f := unicode.SimpleFold(r)
			if f <= r {
				r = f
				break
			}
			r = f
		}
		b.WriteRune(r)
	}
	return b.String()
}
