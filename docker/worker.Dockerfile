# A FIRE RQ worker. Build from the repository root: docker build -f docker/worker.Dockerfile -t fire-worker .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 NUMBA_CACHE_DIR=/srv/fire/numba-cache
RUN useradd --create-home --uid 10001 fire
WORKDIR /srv/fire
COPY pyproject.toml README.md ./
COPY solver ./solver
COPY app ./app
COPY worker ./worker
RUN pip install ".[service]"
# compile the solver into the image's numba cache: a worker container is ready in seconds, not a minute
RUN python -c "from worker.main import warm_solver; warm_solver()" && chown -R fire /srv/fire/numba-cache

USER fire
# The worker loads the compiled solver, then forks a work horse per job; it waits out Redis outages itself.
CMD ["fire-rules", "worker"]
