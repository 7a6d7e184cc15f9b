# syntax=docker/dockerfile:1
#
# The edge, as a static binary on a distroless base that runs as non-root.
# Build from the repository root (compose.yaml does):
#
#   docker build -f deploy/edge.Dockerfile -t orgedge/edge:dev .
#
# The image holds deploy/edge.image.yaml at /etc/edge/edge.yaml: the shipped
# defaults, listening on every interface (:8080, :9090). Mount another file
# there (its addresses take effect: the image sets no EDGE_* variable) or set
# EDGE_* variables (EDGE_UPSTREAM_URL, EDGE_REDIS_PASSWORD, …). See
# docs/operations.md. Stamp the build for edge -version and edge_build_info:
#
#   docker build -f deploy/edge.Dockerfile --build-arg VERSION=v1.2.3 -t orgedge/edge:v1.2.3 .

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first, so that a change to the code reuses the downloaded modules.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG VERSION=dev
# -tags nodev leaves the development mode out (cmd/edge/nodev.go): the image
# links neither the backend, SQLite, pgx, the development issuer nor
# miniredis, and `edge -dev` says it is not in this build.
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -tags nodev -ldflags="-s -w -X main.buildVersion=${VERSION}" -o /out/edge ./cmd/edge

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/edge /edge
COPY deploy/edge.image.yaml /etc/edge/edge.yaml
USER 65532:65532
# 8080: the API (Connect, gRPC over h2c, gRPC-Web, HTTP/JSON); 9090: admin
# (/healthz, /readyz, /metrics), keep it off the public network.
EXPOSE 8080 9090
# The image has no shell and no curl: the binary probes itself. /healthz, not
# /readyz: an orchestrator that restarts unhealthy containers must not
# restart every replica because Redis or the issuer is down
# (docs/operations.md, "Readiness").
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/edge", "-healthcheck", "http://127.0.0.1:9090/healthz"]
ENTRYPOINT ["/edge"]
CMD ["-config", "/etc/edge/edge.yaml"]
