# The FIRE HTTP API. Build from the repository root: docker build -f docker/api.Dockerfile -t fire-api .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 NUMBA_CACHE_DIR=/srv/fire/numba-cache
RUN useradd --create-home --uid 10001 fire
WORKDIR /srv/fire
COPY pyproject.toml README.md ./
COPY solver ./solver
COPY app ./app
COPY worker ./worker
RUN pip install ".[service]"
# scoring runs numba kernels: compile them into the image, so that no container compiles at start
RUN python -c "import numpy as np; from solver import FireRegressor; X = np.random.default_rng(0).normal(size=(64, 3)); \
FireRegressor(n_estimators=3, max_depth=2, n_lambdas=3).fit(X, X[:, 0]).predict(X)" && chown -R fire /srv/fire/numba-cache

USER fire
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=3s CMD python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz')"
# FIRE_REDIS_URL must point at the durable Redis; without it the API would start an embedded one. Listening on
# 0.0.0.0 needs API keys (FIRE_API_KEYS or FIRE_API_KEYS_FILE): `serve` refuses to start without them.
CMD ["fire-rules", "serve", "--host", "0.0.0.0", "--port", "8000"]
