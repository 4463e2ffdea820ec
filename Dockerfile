# One image for the whole suite. It holds the four service binaries and the
# operator binary; each container chooses its program with `command`
# (docker-compose.yml) or `command` in the pod spec (deploy/k8s):
#
#   /usr/local/bin/transfers      :8080
#   /usr/local/bin/ledger         :8081
#   /usr/local/bin/antifraud      :8082
#   /usr/local/bin/notifications  :8083
#   /usr/local/bin/console        :8084  the operator console (no database; reads the services over HTTP)
#   /usr/local/bin/payments       topics create | migrate | outbox ... | dlt ... | probe URL | auth ...
#
# The image holds no fake broker and no development runner: payments is the
# operator CLI only (run and demo are payments-dev, which BINARIES leaves
# out; docker-compose.yml's demo service builds an image of its own with
# BINARIES="payments payments-dev"). Every binary is built with the tag
# nokfake; deploy/deploytest checks every default build target for it.
#
# Build:  docker build -t paysuite/payments:dev .
# Only some binaries (faster local builds):
#         docker build --build-arg BINARIES="transfers payments" .
# No `# syntax=` line: Docker's built-in Dockerfile frontend handles
# RUN --mount, and a syntax image would be pulled on every build (make
# compose-demo builds where no registry is reachable).

ARG GO_VERSION=1.26

# ---- build ------------------------------------------------------------------
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS build

WORKDIR /src

# Static binaries: the runtime image has no libc. Reproducible: no paths or
# VCS state baked in.
ENV CGO_ENABLED=0 \
    GOFLAGS=-buildvcs=false

ARG TARGETOS
ARG TARGETARCH
ARG BINARIES="transfers ledger antifraud notifications console payments"

# The source is bind-mounted, not copied: nothing of it lands in a layer. The
# module and build caches outlive the build, so a source change downloads
# nothing and recompiles only what changed (and the linter tools named in
# go.mod's tool block are never downloaded: only what the binaries import).
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    --mount=type=bind,target=. \
    set -eu; \
    pkgs=""; \
    for bin in ${BINARIES}; do \
      case "$bin" in \
        payments) pkgs="$pkgs ./services/suite/cmd/payments" ;; \
        payments-dev) pkgs="$pkgs ./services/suite/cmd/payments-dev" ;; \
        transfers|ledger|antifraud|notifications|console) pkgs="$pkgs ./services/$bin/cmd/$bin" ;; \
        *) echo "unknown binary: $bin" >&2; exit 1 ;; \
      esac; \
    done; \
    GOOS=$TARGETOS GOARCH=$TARGETARCH \
      go build -tags nokfake -trimpath -ldflags "-s -w" -o /out/ $pkgs

# The nonroot user's auth/, jwks/, transfer-key/ and transfer-jwks/ (empty):
# docker-compose.yml mounts its signing-key and public-JWKS volumes there, and
# an empty volume takes the owner of the folder it is mounted on, so
# auth-keygen and transfer-keygen (65532) may write.
RUN mkdir -p /nonroot-home/auth /nonroot-home/jwks /nonroot-home/transfer-key /nonroot-home/transfer-jwks

# ---- runtime ----------------------------------------------------------------
# distroless static: CA certificates, tzdata, /etc/passwd with nonroot
# (65532), no shell, no package manager.
FROM gcr.io/distroless/static-debian13:nonroot AS runtime

LABEL org.opencontainers.image.title="payments" \
      org.opencontainers.image.description="Payments suite: transfers, ledger, antifraud, notifications, operator console" \
      org.opencontainers.image.source="https://github.com/paysuite/payments"

COPY --from=build /out/ /usr/local/bin/
COPY --from=build --chown=65532:65532 /nonroot-home/ /home/nonroot/

USER 65532:65532

EXPOSE 8080 8081 8082 8083 8084

# No ENTRYPOINT: `command` picks the binary. The default prints the operator
# CLI's usage: every container names its program.
CMD ["/usr/local/bin/payments", "help"]
