"""The ``callid`` command: traced runs, merging, statistics and SQL.

Commands are thin: parse, call a library function, render.  Heavy modules are
imported inside the commands so ``callid --help`` is instant.  Errors are one
line on stderr with exit status 1 (a run or step failed) or 2 (bad usage or input).
"""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from callid_core.ids import DEFAULT_LAYOUT
from callid_core.units import parse_duration, parse_size

DEFAULT_LAYOUT_TEXT = str(DEFAULT_LAYOUT)

app = typer.Typer(
    name="callid",
    help="Trace which disk operations, on which storage server, each MPI-IO call caused.\n\n"
    "Typical session: callid run -n 2 app.py; callid merge callid-out/client.parquet "
    "callid-out/server.parquet -o merged.duckdb; callid stats merged.duckdb",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click errors: "Error: ..." on one line
    epilog="Exit status: 0 success, 1 a run or step failed, 2 bad usage or bad input.",
)

EXIT_FAILED = 1
EXIT_USAGE = 2


def fail(message: str, code: int = EXIT_FAILED) -> NoReturn:
    """Print a one-line error and exit."""
    typer.echo(f"callid: error: {message}", err=True)
    raise typer.Exit(code)


def _size(value: str) -> int:
    try:
        return parse_size(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _duration(value: str) -> float:
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


def _layout(value: str) -> str:
    from callid_core.ids import CallIDError, Layout

    try:
        return str(Layout.parse(value))
    except CallIDError as exc:
        raise typer.BadParameter(str(exc)) from None


Size = Annotated[str, typer.Option(parser=_size, metavar="SIZE")]
DbPath = Annotated[Path, typer.Argument(help="merged database written by 'callid merge'")]
JsonFlag = Annotated[bool, typer.Option("--json", help="print machine-readable JSON")]


def _run_traced(opts) -> object:
    from callid.run import RunError, run
    from callid_core.clock import SkewError
    from callid_core.ids import CallIDError

    try:
        return run(opts)
    except SkewError as exc:
        fail(f"--clock-skew: {exc}", EXIT_USAGE)
    except (RunError, CallIDError) as exc:
        fail(str(exc))


@app.command(context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
def run(
    target: Annotated[list[str] | None, typer.Argument(
        help="SCRIPT [ARGS...] (or, with -m, the module's ARGS)", show_default=False)] = None,
    module: Annotated[str | None, typer.Option("-m", "--module", help="run a module, as python -m")] = None,
    np: Annotated[int, typer.Option("-n", "--np", min=1, help="MPI ranks")] = 2,
    servers: Annotated[int, typer.Option(min=1, help="I/O servers (plus one metadata server)")] = 2,
    strip_size: Size = "64KiB",
    flow_buffer: Size = "64KiB",
    small_io: Annotated[str, typer.Option(parser=_size, metavar="SIZE",
                                          help="small-I/O threshold per server; 0 disables")] = "16KiB",
    callid: Annotated[bool, typer.Option("--callid/--no-callid",
                                         help="stamp and propagate CallIDs (off: trace only)")] = True,
    callid_layout: Annotated[str, typer.Option(
        parser=_layout, metavar="TOTAL/RANK", help="CallID bits, e.g. 64/23 or the thesis' 32/8"
    )] = DEFAULT_LAYOUT_TEXT,
    mount: Annotated[list[str] | None, typer.Option(
        help="path prefix of the simulated file system (repeatable)", show_default="/pvfs2")] = None,
    ranks_per_host: Annotated[int, typer.Option(
        min=0, help="group ranks into simulated hosts of this size (0: one host)")] = 0,
    clock_skew: Annotated[str, typer.Option(
        metavar="SPEC", help="give clocks an offset and drift, e.g. server:0=+40ms@30ppm,host:1=-3ms@-12ppm "
        "(server:N is ioN; host:N needs --ranks-per-host)")] = "",
    out: Annotated[Path, typer.Option("-o", "--out", help="output directory")] = Path("callid-out"),
    timeout: Annotated[float | None, typer.Option(
        help="give up on the ranks after this many seconds")] = None,
) -> None:
    """Run an mpi4py program traced, on a simulated striped file system.

    Starts one metadata server and --servers I/O servers on loopback, runs the
    ranks with the mpich wheel's mpiexec, stops the servers and writes
    OUT/client.parquet and OUT/server.parquet.

    Example: callid run -n 2 --servers 2 examples/callid_demo.py
    """
    from callid.run import RunOptions

    if module:
        target = ["-m", module, *(target or [])]
    if not target:
        fail("nothing to run: give SCRIPT [ARGS...] or -m MODULE [ARGS...]", EXIT_USAGE)
    if not module and not Path(target[0]).is_file():
        if target[0].startswith("-"):  # (options after the first unknown one reach the target)
            fail(f"no such option: {target[0]} (see 'callid run --help')", EXIT_USAGE)
        fail(f"{target[0]}: no such script", EXIT_USAGE)
    opts = RunOptions(target=target, np=np, servers=servers, strip_size=strip_size,
                      flow_buffer=flow_buffer, small_io=small_io,
                      callid=callid, callid_layout=callid_layout, mount=mount or ["/pvfs2"],
                      ranks_per_host=ranks_per_host, clock_skew=clock_skew, out=str(out),
                      timeout=timeout)
    result = _run_traced(opts)
    typer.echo(f"callid: run finished in {result.seconds:.1f} s: {result.client_rows} client rows, "
               f"{result.server_rows} server events", err=True)
    typer.echo(f"  client log: {result.client}\n  server log: {result.server}", err=True)
    typer.echo(f"next: callid merge {result.client} {result.server} -o {out / 'merged.duckdb'}", err=True)


@app.command()
def merge(
    client: Annotated[str, typer.Argument(help="client log: file, directory or glob of parts")],
    server: Annotated[str, typer.Argument(help="server log: file, directory or glob of parts")],
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", help="database to write", show_default="merged.duckdb next to CLIENT")] = None,
    fmt: Annotated[str, typer.Option(
        "--format", help="duckdb (one file) or parquet (a directory with one file per table)")] = "duckdb",
    memory_limit: Annotated[str | None, typer.Option(
        help="DuckDB memory limit, e.g. 4GB; beyond it the merge spills to disk",
        show_default="half of the RAM")] = None,
    clock_sync: Annotated[str, typer.Option(
        help="clock model: none (times as logged), offset, or offset and drift, per time window")] = "drift",
    as_json: JsonFlag = False,
) -> None:
    """Merge client and server logs into one DuckDB database with calls, arrows and fan-out.

    Every clock is aligned onto rank 0's host clock from causal constraints
    (requests are received after they are sent, responses before they arrive,
    requests start after their calls); the clocks table gives each clock's offset,
    drift, guaranteed bound and causality violations before and after.

    The output is written under a temporary name and renamed at the end: on any
    error nothing is written.

    Example: callid merge callid-out/client.parquet callid-out/server.parquet -o merged.duckdb
    """
    from callid_core.errors import InputError
    from pipeline.merge import merge as do_merge

    if output is None:
        base = Path(client)
        output = (base if base.is_dir() else base.parent) / ("merged.duckdb" if fmt == "duckdb" else "merged")
    try:
        with _steps("merging", quiet=as_json) as on_step:
            summary = do_merge(client, server, str(output), memory_limit=memory_limit, fmt=fmt,
                               clock_sync=clock_sync, on_step=on_step)
    except InputError as exc:
        fail(str(exc), EXIT_USAGE)
    if as_json:
        import json

        typer.echo(json.dumps({"output": str(output), **summary}, default=str))
    else:
        counts = ", ".join(f"{v} {k}" for k, v in summary.items() if isinstance(v, int))
        typer.echo(f"callid: wrote {output} ({counts})")
        typer.echo(f"next: callid stats {output}", err=True)


@app.command()
def stats(
    dbs: Annotated[list[Path], typer.Argument(
        metavar="DB...", help="merged database(s); several are compared side by side")],
    as_json: JsonFlag = False,
) -> None:
    """Print the thesis' statistics and fan-out, fan-in, per-server and attribution figures.

    With several databases (e.g. the same workload with collective buffering on and
    off) the figures are printed side by side; --json prints a list.

    Example: callid stats merged.duckdb --json
    """
    from callid_core.errors import InputError
    from pipeline.stats import compute_stats, render_comparison, render_stats

    try:
        figures = [compute_stats(str(db)) for db in dbs]
    except InputError as exc:
        fail(str(exc), EXIT_USAGE)
    if as_json:
        import json

        typer.echo(json.dumps(figures[0] if len(figures) == 1 else figures, default=str))
    elif len(figures) == 1:
        typer.echo(render_stats(figures[0]))
    else:
        typer.echo(render_comparison([str(db) for db in dbs], figures))


@app.command()
def sql(
    db: DbPath,
    query: Annotated[str | None, typer.Argument(help="SQL query (or use -f)")] = None,
    file: Annotated[Path | None, typer.Option("-f", "--file", help="read the query from a file")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table, csv, json or markdown")] = "table",
) -> None:
    """Run a SQL query on a merged database (tables: calls, rpcs, server_ops, arrows, fanout, ...).

    Example: callid sql merged.duckdb "SELECT func, count(*) FROM arrows GROUP BY func"
    """
    from callid_core.errors import InputError
    from pipeline.query import format_rows, run_query

    if fmt not in ("table", "csv", "json", "markdown"):
        fail(f"--format {fmt!r}: choose table, csv, json or markdown", EXIT_USAGE)
    if file is not None:
        try:
            query = file.read_text()
        except OSError as exc:
            fail(f"{file}: {exc.strerror}", EXIT_USAGE)
    if not query:
        fail("no query: give QUERY or -f FILE", EXIT_USAGE)
    try:
        columns, rows = run_query(str(db), query)
    except InputError as exc:
        fail(str(exc), EXIT_USAGE)
    typer.echo(format_rows(columns, rows, fmt))


@contextmanager
def _steps(title: str, quiet: bool = False):
    """A progress display on stderr for a chain of named steps; yields the step callback."""
    if quiet or not sys.stderr.isatty():
        yield lambda name: None
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  transient=True) as progress:
        task = progress.add_task(title)
        yield lambda name: progress.update(task, description=f"{title}: {name}")


def _write(writer, db: Path, output: Path) -> int:
    """Run ``writer(db, output)``; bad input or an unwritable output is a one-line error."""
    from callid_core.errors import InputError

    try:
        return writer(str(db), str(output))
    except InputError as exc:
        fail(str(exc), EXIT_USAGE)
    except OSError as exc:
        fail(f"{output}: {exc.strerror}")


@app.command()
def view(
    db: DbPath,
    output: Annotated[Path, typer.Option("-o", "--output", help="page to write")] = Path("timeline.html"),
) -> None:
    """Write one self-contained HTML timeline: lanes per rank and server, arrows per disk operation.

    Zoom with the wheel, pan by dragging, hover for the CallID and details, click a call
    to highlight its fan-out, filter by rank, file, function or CallID.  Summary plots
    (fan-out, fan-in, per-server load, latency breakdown) are below the timeline.

    Example: callid view merged.duckdb -o timeline.html
    """
    from pipeline.timeline import write_timeline

    n = _write(write_timeline, db, output)
    typer.echo(f"callid: wrote {output} ({n} events); open it in a browser")


@app.command()
def export(
    db: DbPath,
    output: Annotated[Path, typer.Option("-o", "--output", help="file to write")] = Path("trace.json"),
    fmt: Annotated[str, typer.Option("--format", help="chrome (trace-event JSON for Perfetto)")] = "chrome",
) -> None:
    """Export the merged trace with its call -> disk-operation arrows for other viewers.

    chrome: Chrome trace-event JSON; open it in https://ui.perfetto.dev or chrome://tracing.
    Ranks and servers are tracks, the CallID is in every slice's args, arrows are flow events.

    Example: callid export merged.duckdb --format chrome -o trace.json
    """
    from pipeline.export import write_chrome_trace

    if fmt != "chrome":
        fail(f"--format {fmt!r}: only 'chrome' is available", EXIT_USAGE)
    n = _write(write_chrome_trace, db, output)
    typer.echo(f"callid: wrote {output} ({n} trace events); open it in https://ui.perfetto.dev")


@app.command()
def synth(
    out: Annotated[Path, typer.Option("-o", "--out", help="output directory")] = Path("synth-out"),
    ranks: Annotated[int, typer.Option(min=1, help="ranks")] = 4,
    servers: Annotated[int, typer.Option(min=1, help="I/O servers")] = 2,
    calls: Annotated[int, typer.Option(min=1, help="calls in all")] = 1000,
    fanout: Annotated[int, typer.Option(min=1, help="disk operations per call")] = 10,
    collective_share: Annotated[float, typer.Option(
        min=0, max=1, help="share of collective calls")] = 0.1,
    skew: Annotated[str, typer.Option(
        metavar="SPEC", help="clock offsets, drifts and drift wander, e.g. "
        "server:0=+250ms@15ppm~1ppm,host:1=-3ms@-12ppm (as callid run --clock-skew)")] = "",
    duration: Annotated[str, typer.Option(
        parser=_duration, metavar="D", help="time from the first call to the last, e.g. 1h",
        show_default="calls back to back")] = "0",
    async_share: Annotated[float, typer.Option(
        min=0, max=1, help="share of writes whose disk operations end after the call (write-back)")] = 0.0,
    misjoined: Annotated[int, typer.Option(min=0, help="requests logged with another call's CallID")] = 0,
    ranks_per_host: Annotated[int, typer.Option(
        min=0, help="ranks per simulated host (0: all on one host)")] = 0,
    seed: Annotated[int, typer.Option(help="random seed")] = 0,
) -> None:
    """Write synthetic client and server logs with their true arrows and clocks (for tests and benchmarks).

    OUT/client.parquet and OUT/server.parquet have the schemas of a real run;
    OUT/truth.parquet lists the exact arrows (callid, server, event_id); the true
    clock parameters are in the files' metadata, as a real run stores them.

    Example: callid synth --ranks 16 --calls 1000000 --duration 1h --skew server:0=+250ms@15ppm -o big
    """
    from callid_core.clock import SkewError
    from pipeline.synth import SynthError, SynthOptions, synthesize

    opts = SynthOptions(ranks=ranks, servers=servers, calls=calls, fanout=fanout,
                        collective_share=collective_share, skew=skew, duration=duration,
                        async_share=async_share, misjoined=misjoined, ranks_per_host=ranks_per_host,
                        seed=seed)
    try:
        with _steps("synth") as step:
            counts = synthesize(opts, out, on_chunk=lambda done, total: step(f"{done * 100 // total}%"))
    except SkewError as exc:
        fail(f"--skew: {exc}", EXIT_USAGE)
    except SynthError as exc:
        fail(str(exc), EXIT_USAGE)
    except OSError as exc:
        fail(f"{out}: {exc.strerror}")
    typer.echo(f"callid: wrote {out}/client.parquet, server.parquet and truth.parquet ({counts['calls']} "
               f"calls, {counts['rpcs']} requests, {counts['server_ops']} server events, "
               f"{counts['arrows']} arrows)")


@app.command()
def demo(
    out: Annotated[Path, typer.Option("-o", "--out", help="output directory")] = Path("callid-out"),
    np: Annotated[int, typer.Option("-n", "--np", min=1, help="MPI ranks")] = 2,
    servers: Annotated[int, typer.Option(min=1, help="I/O servers")] = 2,
) -> None:
    """Run the thesis demo traced, merge the logs and print the statistics.

    Each rank writes 1 MiB to its segment of /pvfs2/demo, all synchronise, and each
    reads back the next rank's segment and checks it.
    """
    from callid.run import RunOptions
    from callid_core.errors import InputError
    from pipeline.merge import merge as do_merge
    from pipeline.stats import compute_stats, render_stats

    script = Path(__file__).resolve().parents[1] / "examples" / "callid_demo.py"
    if not script.is_file():
        fail(f"{script}: demo script not found (install from a checkout: pip install -e .)")
    result = _run_traced(RunOptions(target=[str(script)], np=np, servers=servers, out=str(out)))
    db = out / "merged.duckdb"
    try:
        do_merge(str(result.client), str(result.server), str(db))
        typer.echo(render_stats(compute_stats(str(db))))
    except InputError as exc:
        fail(str(exc))
    typer.echo(f"\nmerged database: {db}   (try: callid sql {db} \"SELECT * FROM fanout\")", err=True)


def main() -> None:
    """Entry point of the ``callid`` console script."""
    try:
        app()
    except KeyboardInterrupt:
        typer.echo("callid: interrupted", err=True)
        sys.exit(130)


if __name__ == "__main__":
    main()
