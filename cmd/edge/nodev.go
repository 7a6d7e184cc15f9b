//go:build nodev

package main

import (
	"context"
	"errors"
	"io"

	"github.com/orgedge/edge/config"
)

// errNoDev is what -dev answers in a build without the development mode:
// the production image links neither the backend nor the development
// issuer nor the embedded Redis that -dev runs.
var errNoDev = errors.New("-dev: this edge is built without the development mode (build tag nodev, as the production image is); run the development stack from the source tree: go run ./cmd/edge -dev")

// devStack is never started in this build; main.go names it.
type devStack struct{ config *config.Config }

func startDev(context.Context, string, string) (*devStack, error) { return nil, errNoDev }

func (*devStack) stop() {}

func (*devStack) print(io.Writer, string, string) {}
