# syntax=docker/dockerfile:1
#
# The backend (orgsvc), as a static binary on a distroless base that runs as
# non-root. Build from the repository root (compose.yaml does):
#
#   docker build -f deploy/orgsvc.Dockerfile -t orgedge/orgsvc:dev .
#
# Configure it with ORGSVC_* variables: ORGSVC_DATABASE (a postgres:// DSN),
# ORGSVC_ISSUER_URL, ORGSVC_AUDIENCE, ORGSVC_ROLE_CLAIMS. See README.md.
# Stamp the build for orgsvc -version and its build_info metric with
# --build-arg VERSION=v1.2.3.

ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# CGO_ENABLED=0 works for SQLite too (modernc.org/sqlite is pure Go), but a
# container should use PostgreSQL: its file system is not the place for data.
ARG VERSION=dev
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.buildVersion=${VERSION}" -o /out/orgsvc ./cmd/orgsvc

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/orgsvc /orgsvc
# Listen on every interface inside the container; the defaults are loopback.
ENV ORGSVC_ADDR=:8082 \
    ORGSVC_ADMIN_ADDR=:9092 \
    ORGSVC_LOG_FORMAT=json
USER 65532:65532
# 8082: the API (h2c); 9092: admin (/healthz, /readyz, /metrics).
EXPOSE 8082 9092
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/orgsvc", "-healthcheck", "http://127.0.0.1:9092/readyz"]
ENTRYPOINT ["/orgsvc"]
