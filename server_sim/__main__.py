"""``python -m server_sim serve --config fs.json --name io0 [--addr-file F]``: run one server."""

from __future__ import annotations

import argparse
import logging
import sys

from callid_core.config import Config
from callid_core.errors import CallidError, os_reason
from server_sim.server import EXIT_LOG_LOST, Server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server_sim", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run one server of the file system in the foreground")
    serve.add_argument("--config", required=True, help="file system configuration (JSON)")
    serve.add_argument("--name", required=True, help="which server of the configuration to run")
    serve.add_argument("--addr-file", help="write {host, port, pid, hostname} here once listening")
    serve.add_argument("--log-level", default="WARNING")
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        config = Config.load(args.config)
        server = Server(config, args.name)
    except (CallidError, OSError) as exc:
        print(f"server_sim: cannot start server {args.name!r}: {exc}", file=sys.stderr)
        return 2
    try:
        listener = server.listen()
    except OSError as exc:  # (an address of another host, a port in use)
        print(f"server_sim: server {args.name!r} cannot listen on {server.me.host}:{server.me.port}: "
              f"{os_reason(exc)}", file=sys.stderr)
        return 2
    return 0 if server.serve(args.addr_file, listener) else EXIT_LOG_LOST


if __name__ == "__main__":
    sys.exit(main())
