# walrelay as a container: a static binary (CGO_ENABLED=0) on distroless
# static, run as the numeric non-root user 65532.
#
#   docker build -t walrelay:1.4.0 --build-arg VERSION=1.4.0 .
#
# VERSION is what `walrelay version` and the metric walrelay_build_info
# report; left empty, scripts/build.sh takes `git describe --tags --always
# --dirty` of the build context's .git. test/deploy/image_test.go runs this
# stage's build line (the RUN with scripts/build.sh) as it stands here.
#
# Why distroless static and not scratch: it carries the CA certificates
# (--kafka-tls and --postgres-sslrootcert system verify against the system's
# roots), /etc/passwd with the nonroot user, and tzdata, and nothing else: no
# shell, no package manager. Without a shell or curl there is no HEALTHCHECK;
# orchestrators probe /healthz and /readyz on port 9187 (docs/DEPLOY.md).
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=""
RUN CGO_ENABLED=0 VERSION="${VERSION}" scripts/build.sh /out/walrelay

FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=""
LABEL org.opencontainers.image.title="walrelay" \
      org.opencontainers.image.description="Transactional outbox relay: PostgreSQL logical replication to Kafka" \
      org.opencontainers.image.version="${VERSION}"
COPY --from=build /out/walrelay /walrelay
# The binary's default is loopback (docs/SECURITY.md, "The metrics listener"):
# in a container only 0.0.0.0 can be reached through a published port or a
# pod's IP. Let the network (a NetworkPolicy, the compose network) decide who
# scrapes it; an empty value turns the listener off.
ENV WALRELAY_METRICS_ADDR=0.0.0.0:9187
# Numeric, so that Kubernetes' runAsNonRoot can verify it (distroless's
# "nonroot" user is 65532).
USER 65532:65532
EXPOSE 9187
ENTRYPOINT ["/walrelay"]
CMD ["run"]
