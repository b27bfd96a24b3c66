"""`fire-rules serve` and `fire-rules worker`."""
import argparse
import logging
import os
import sys


def serve(args: argparse.Namespace) -> None:
    import uvicorn

    from app.core.config import get_settings
    from app.core.embedded import EmbeddedStack

    settings = get_settings()
    stack = None
    if settings.redis_url is None:
        stack = EmbeddedStack(settings.data_dir, settings.embedded_workers)
        os.environ["FIRE_REDIS_URL"] = stack.start()
        get_settings.cache_clear()
        print(f"embedded Redis at {stack.redis_url} (data in {settings.data_dir}), "
              f"{settings.embedded_workers} workers", file=sys.stderr)
    try:
        from app.main import create_app

        uvicorn.run(create_app(get_settings()), host=args.host, port=args.port, log_level=args.log_level)
    finally:
        if stack is not None:
            stack.stop()


def worker(args: argparse.Namespace) -> None:
    from app.core.config import get_settings
    from worker.main import run_worker

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    ran_jobs = run_worker(get_settings(), args.queues, args.burst)
    if args.burst and not ran_jobs:
        logging.getLogger(__name__).info("burst worker found no jobs")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="fire-rules", description="FIRE rule-extraction service")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser("serve", help="run the HTTP API (with an embedded Redis and workers "
                                                     "unless FIRE_REDIS_URL is set)")
    serve_parser.add_argument("--host", default="127.0.0.1")
    serve_parser.add_argument("--port", type=int, default=8000)
    serve_parser.add_argument("--log-level", default="info")
    serve_parser.set_defaults(handler=serve)
    worker_parser = commands.add_parser("worker", help="run an RQ worker against FIRE_REDIS_URL")
    worker_parser.add_argument("--burst", action="store_true", help="exit once the queues are empty")
    worker_parser.add_argument("--queues", nargs="+", help="queue names (default: FIRE_QUEUE_NAME)")
    worker_parser.set_defaults(handler=worker)
    args = parser.parse_args(argv)
    args.handler(args)


if __name__ == "__main__":
    main()
