# The FIRE HTTP API. Build from the repository root: docker build -f docker/api.Dockerfile -t fire-api .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN useradd --create-home --uid 10001 fire
WORKDIR /srv/fire
COPY pyproject.toml README.md ./
COPY solver ./solver
COPY app ./app
COPY worker ./worker
RUN pip install ".[service]"

USER fire
EXPOSE 8000
HEALTHCHECK --interval=30s --timeout=3s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
# FIRE_REDIS_URL must point at the durable Redis; without it the API would start an embedded one.
CMD ["fire-rules", "serve", "--host", "0.0.0.0", "--port", "8000"]
