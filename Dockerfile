# One image for both services: `transcriber pocketbase` and `transcriber worker`.
FROM python:3.11-slim

WORKDIR /app
COPY pyproject.toml README.md ./
COPY sidecar ./sidecar
COPY pb_migrations ./pb_migrations
COPY pb_hooks ./pb_hooks
COPY samples ./samples
RUN pip install --no-cache-dir . && useradd --create-home --uid 1000 transcriber \
    && mkdir -p /data && chown transcriber /data

USER transcriber
ENV TRANSCRIBER_POCKETBASE__DATA_DIR=/data
EXPOSE 8090
CMD ["transcriber", "worker"]
