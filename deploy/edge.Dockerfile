# syntax=docker/dockerfile:1
#
# The edge, as a static binary on a distroless base that runs as non-root.
# Build from the repository root (compose.yaml does):
#
#   docker build -f deploy/edge.Dockerfile -t orgedge/edge:dev .
#
# The image holds config/edge.yaml (the shipped defaults) at
# /etc/edge/edge.yaml; mount another file there or set EDGE_* variables
# (addresses, EDGE_REDIS_PASSWORD). See docs/operations.md.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
# Modules first, so that a change to the code reuses the downloaded modules.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/edge ./cmd/edge

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/edge /edge
COPY config/edge.yaml /etc/edge/edge.yaml
# Listen on every interface inside the container; the file's defaults are loopback.
ENV EDGE_LISTEN_ADDR=:8080 \
    EDGE_ADMIN_ADDR=:9090
USER 65532:65532
# 8080: the API (Connect, gRPC over h2c, gRPC-Web, HTTP/JSON); 9090: admin
# (/healthz, /readyz, /metrics), keep it off the public network.
EXPOSE 8080 9090
# The image has no shell and no curl: the binary probes itself.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/edge", "-healthcheck", "http://127.0.0.1:9090/readyz"]
ENTRYPOINT ["/edge"]
CMD ["-config", "/etc/edge/edge.yaml"]
