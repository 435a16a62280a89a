# meshbridge's image: `make image` (docker or podman) builds it as
# ghcr.io/meshbridge/meshbridge:$(VERSION); charts/meshbridge runs it.
#
# Build stage: a static binary of ./cmd/bridge (CGO_ENABLED=0), stamped
# with the version as make build does (-X main.version).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/meshbridge ./cmd/bridge

# Final stage: distroless static (CA certificates, tzdata, /etc/passwd with
# nonroot 65532; no shell), run as that user.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/meshbridge /usr/local/bin/meshbridge
USER 65532:65532
# 15010 xDS (and MCP), 15014 probes and /metrics; 15015 (debug) stays on
# loopback.
EXPOSE 15010 15014
ENTRYPOINT ["/usr/local/bin/meshbridge"]
CMD ["run", "--config", "/etc/meshbridge/config.yaml"]
