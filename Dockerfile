# agentd: multi-stage build, small non-root runtime image with the example config and agents.
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY Cargo.toml Cargo.lock ./
COPY src src
COPY migrations migrations
COPY tests tests
COPY examples examples
COPY bench bench
RUN cargo build --release --locked --bin agentd

FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /var/lib/agentd --create-home agentd
COPY --from=build /src/target/release/agentd /usr/local/bin/agentd
COPY config /etc/agentd
USER agentd
WORKDIR /var/lib/agentd
ENV AGENTD_LISTEN=0.0.0.0:8080 AGENTD_DATABASE_URL=sqlite:///var/lib/agentd/agentd.db
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s CMD curl -fsS http://127.0.0.1:8080/health || exit 1
# Listening on 0.0.0.0 needs an API key: set AGENTD_ADMIN_KEY (clients send it as a bearer token).
ENTRYPOINT ["agentd"]
CMD ["serve", "--config", "/etc/agentd/agentd.json"]
