# The load balancer in front of the API servers: Debian's HAProxy, so the
# image builds from the same Debian base as the rest (no Docker Hub needed).
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends haproxy curl ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY haproxy.cfg /etc/haproxy/haproxy.cfg
CMD ["haproxy", "-W", "-db", "-f", "/etc/haproxy/haproxy.cfg"]
