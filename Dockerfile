# One image for every otel-session service of the compose stack: collector, viewer, demo agent,
# mock LLM and driver (each service picks its command). Build: docker build -t otel-session .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY otel_session ./otel_session
COPY collector ./collector
COPY viewer ./viewer
RUN pip install '.[demo,postgres,s3]' && rm -rf /src

# Bundles live on a volume owned by an unprivileged user (directories 0700, files 0600).
RUN useradd --system --uid 10001 --home-dir /nonexistent otel \
    && mkdir /bundles && chown otel /bundles
USER otel
WORKDIR /bundles
VOLUME ["/bundles"]

CMD ["otel-session", "--help"]
