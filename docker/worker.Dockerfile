# A FIRE RQ worker. Build from the repository root: docker build -f docker/worker.Dockerfile -t fire-worker .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 NUMBA_CACHE_DIR=/tmp/numba-cache
RUN useradd --create-home --uid 10001 fire
WORKDIR /srv/fire
COPY pyproject.toml README.md ./
COPY solver ./solver
COPY app ./app
COPY worker ./worker
RUN pip install ".[service]"

USER fire
# The worker compiles the solver once, then forks a work horse per job.
CMD ["fire-rules", "worker"]
