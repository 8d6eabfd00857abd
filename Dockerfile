# One image for both services: `transcriber pocketbase` and `transcriber worker`.
# EXTRAS=diarize adds offline speaker labels (about 1.5 GB more; see README "Speakers"):
#   EXTRAS=diarize docker compose build   (or docker build --build-arg EXTRAS=diarize .)
# EXTRAS=insights adds the offline brief and topics (llama.cpp's prebuilt binding, about 100 MB,
# and GCC's OpenMP runtime from Debian, which it links against; see README "Brief and topics").
# No model is put in the image: mount a GGUF file and name it in [insights] model.
#   EXTRAS=insights docker compose build
# Both: docker build --build-arg EXTRAS=diarize,insights -t transcriber:0.2.0-full .
FROM python:3.11-slim

ARG EXTRAS=""
LABEL org.opencontainers.image.title="transcriber" org.opencontainers.image.version="0.2.0"
WORKDIR /src
# The dependencies first, from pyproject.toml alone: this layer is built again only when they
# (or EXTRAS) change, not at every change of the code.
# The diarize extra needs torch: its CPU build first, from PyTorch's CPU wheel
# index (the default index would bring the CUDA build, several GB).
COPY pyproject.toml ./
COPY scripts/install-torch-cpu scripts/dependencies ./scripts/
RUN case ",$EXTRAS," in *,insights,*) apt-get update \
        && apt-get install -y --no-install-recommends libgomp1 && rm -rf /var/lib/apt/lists/* ;; esac \
    && case ",$EXTRAS," in *,diarize,*) scripts/install-torch-cpu python --no-cache-dir ;; esac \
    && scripts/dependencies "$EXTRAS" > /tmp/requirements.txt \
    && pip install --no-cache-dir -r /tmp/requirements.txt && rm /tmp/requirements.txt
# Then the project, with its migrations, hooks and sender's page inside the package: the ones
# PocketBase runs, always of the package's own release. The sources are not kept.
COPY README.md ./
COPY sidecar ./sidecar
COPY pb_migrations ./pb_migrations
COPY pb_hooks ./pb_hooks
COPY pb_public ./pb_public
COPY samples ./samples
RUN pip install --no-cache-dir --no-deps . && pip check \
    && cd / && rm -rf /src \
    && useradd --create-home --uid 1000 transcriber && mkdir -p /app /data /keys && chown transcriber /data /keys && chmod 0700 /keys

WORKDIR /app
USER transcriber
ENV TRANSCRIBER_POCKETBASE__DATA_DIR=/data
EXPOSE 8090
CMD ["transcriber", "worker"]
