"""`fire-rules serve` and `fire-rules worker`."""

import argparse
import ipaddress
import logging
import os
import signal
import sys


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _exit_on_sigterm(signum, frame) -> None:
    # uvicorn re-raises the SIGTERM it caught once it has shut down; with the default handler the process would
    # die there, before `serve` stops its Redis and workers. SystemExit unwinds through that cleanup instead.
    raise SystemExit(128 + signum)


def serve(args: argparse.Namespace) -> None:
    import uvicorn

    from app.core.config import LOG_FORMAT, get_settings
    from app.core.embedded import EmbeddedStack
    from app.core.tenants import TenantKeys

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    settings = get_settings()
    try:
        keys = TenantKeys.from_settings(settings)
    except (ValueError, OSError) as error:
        sys.exit(f"fire-rules serve: {error}")
    if not keys.required:
        if not is_loopback(args.host):
            sys.exit(
                f"fire-rules serve: no API keys are configured, so the API would be open to anyone who reaches "
                f"{args.host}; it only listens on loopback without them. Set FIRE_API_KEYS (or "
                f"FIRE_API_KEYS_FILE) to listen on {args.host}."
            )
        print(
            f"no API keys configured: authentication is off, listening on loopback only ({args.host})", file=sys.stderr
        )
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    from app.main import create_app  # the API's imports first: they take seconds, and the workers' would compete

    stack = None
    try:
        if settings.redis_url is None:
            stack = EmbeddedStack(settings.data_dir, settings.embedded_workers)
            os.environ["FIRE_REDIS_URL"] = stack.start()
            os.environ["FIRE_EMBEDDED"] = "true"
            get_settings.cache_clear()
            print(
                f"embedded Redis at {stack.redis_url} (data in {settings.data_dir}), "
                f"{settings.embedded_workers} workers (restarted if they die)",
                file=sys.stderr,
            )
        workers = get_settings().api_workers
        if workers > 1:  # uvicorn's processes build the app from the environment
            uvicorn.run(
                "app.main:create_app",
                factory=True,
                workers=workers,
                host=args.host,
                port=args.port,
                log_level=args.log_level,
            )
        else:
            uvicorn.run(create_app(get_settings()), host=args.host, port=args.port, log_level=args.log_level)
    finally:
        if stack is not None:
            stack.stop()


def worker(args: argparse.Namespace) -> None:
    from app.core.config import LOG_FORMAT, get_settings
    from worker.main import run_worker

    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    ran_jobs = run_worker(get_settings(), args.queues, args.burst)
    if args.burst and not ran_jobs:
        logging.getLogger(__name__).info("burst worker found no jobs")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="fire-rules", description="FIRE rule-extraction service")
    commands = parser.add_subparsers(dest="command", required=True)
    serve_parser = commands.add_parser(
        "serve", help="run the HTTP API (with an embedded Redis and workers unless FIRE_REDIS_URL is set)"
    )
    serve_parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="a non-loopback address needs API keys (FIRE_API_KEYS or FIRE_API_KEYS_FILE)",
    )
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
