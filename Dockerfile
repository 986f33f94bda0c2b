# darkroom: a self-hosted MCP server, as a static binary on distroless.
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t darkroom .
#   docker run -p 8080:8080 -v darkroom-data:/data \
#     -e DARKROOM_API_KEYS=... -e DARKROOM_PUBLIC_URL=https://darkroom.example.com darkroom
#
# The container listens on 0.0.0.0:8080, and darkroom refuses a non-loopback
# bind without authentication: it will not start until API keys are set with
# DARKROOM_API_KEYS (or DARKROOM_API_KEYS_FILE pointing at a mounted secret).
# Set DARKROOM_PUBLIC_URL to the externally reachable URL so file links and
# webhooks do not point at 0.0.0.0.
# Metrics listen on 127.0.0.1:9464 inside the container; to scrape them set
# DARKROOM_METRICS_TOKEN and scrape /metrics on 8080 with that bearer token.
# `docker stop` sends SIGTERM (STOPSIGNAL) and kills after 10 s: the image
# sets DARKROOM_SHUTDOWN_GRACE=8s (the binary's own default is 20s) so the
# drain always ends first. Raise both together: docker stop --time, compose
# stop_grace_period, Kubernetes terminationGracePeriodSeconds.
# Built and checked with Podman by scripts/image.sh (make image-test).
# Lint offline with scripts/dockerlint.sh (the rules of `docker build --check`).

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Dependencies get their own layer, rebuilt only when go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# CGO_ENABLED=0: modernc.org/sqlite is pure Go, so the binary is fully static.
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w -X main.version=${VERSION}" -o /out/darkroom ./cmd/darkroom \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="darkroom" \
      org.opencontainers.image.description="Self-hosted MCP server for image and video generation" \
      org.opencontainers.image.source="https://github.com/darkroom-mcp/darkroom" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.base.name="gcr.io/distroless/static-debian12:nonroot" \
      io.modelcontextprotocol.server.name="io.github.darkroom-mcp/darkroom"
COPY --from=build /out/darkroom /darkroom
# The database and local files live in /data, owned by nonroot (65532) so a
# fresh named volume is initialised writable.
COPY --from=build --chown=65532:65532 /out/data /data
ENV DARKROOM_ADDR=0.0.0.0:8080 \
    DARKROOM_DATA_DIR=/data \
    DARKROOM_SHUTDOWN_GRACE=8s
VOLUME /data
EXPOSE 8080
USER nonroot
# Liveness through the binary itself (distroless has no curl): GET /healthz
# on DARKROOM_ADDR's port. Load balancers should probe /readyz instead
# (`darkroom healthcheck --ready` does); see docs/operations.md.
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
  CMD ["/darkroom", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/darkroom"]
CMD ["serve"]
