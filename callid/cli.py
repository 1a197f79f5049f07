"""The ``callid`` command: traced runs, merging, statistics, SQL, timelines and exports.

Commands are thin: parse, call a library function, render.  Heavy modules are
imported inside the commands so ``callid --help`` is instant.  Conventions:
``-o/--output`` names the file (or merged output) a command writes, ``-d/--out-dir``
the directory it writes into; ``--format`` picks a rendering; ``--json`` prints a
command's summary as JSON.  Every error derives from ``callid_core.errors.CallidError``
and is printed by :func:`main`, in one place, as one line with its exit status.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import signal
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from callid_core import config as defaults
from callid_core import outputs
from callid_core.atomic import INTERRUPTED, Interrupt, on_interrupt
from callid_core.choices import (
    SERVER_LAYERS,
    ClockSync,
    Engine,
    MpiIo,
    Payload,
    Readers,
    RowFormat,
    Storage,
    Timing,
    TraceFormat,
    parse_layers,
)
from callid_core.errors import EXIT_FAILED, EXIT_USAGE, BadValue, CallidError, Failed, InputError, os_reason
from callid_core.ids import DEFAULT_LAYOUT
from callid_core.outputs import guard_output
from callid_core.units import format_size, parse_duration, parse_size
from pipeline.synth_options import SynthOptions


class _Command(TyperCommand):
    """Plain help: arguments by their metavar (``CLIENT_LOG``, ``[QUERY]``), no ``<str>`` type labels."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name == "argument":
                name = param.metavar or param.name.upper()
                pieces.append(name if param.required else f"[{name}]")
        return pieces

    def format_options(self, ctx: typer.Context, formatter: Any) -> None:
        args, opts = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                args.append((param.metavar or param.name.upper(), record[1]))
            else:
                opts.append(record)
        for title, rows in (("Arguments", args), ("Options", opts)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


#: the defaults of ``callid synth`` (one definition: the synthetic trace's options)
SYNTH = SynthOptions()

app = typer.Typer(
    name="callid",
    help="Trace which disk operations, on which storage server, each MPI-IO call caused.\n\n"
    "Typical session: callid run -n 2 app.py; callid merge callid-out/client.parquet "
    "callid-out/server.parquet -o merged.duckdb; callid insights merged.duckdb; callid report merged.duckdb "
    "-o report.html",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # plain click errors: "Error: ..." on one line
    epilog=f"Exit status: 0 success, {EXIT_FAILED} a run or step failed, {EXIT_USAGE} bad usage or input.",
)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"callid {version('callid')}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[bool, typer.Option(
        "--version", callback=_version, is_eager=True, help="print the version and exit")] = False,
    readable_by: Annotated[Readers, typer.Option(
        help="who may read the files and directories this command writes (logs, servers' storage, merged "
        "outputs, pages): owner only, the owner's group too, or every local user")] = Readers.OWNER,
) -> None:
    """Trace which disk operations, on which storage server, each MPI-IO call caused."""
    os.umask(readable_by.umask)  # (inherited by the ranks and servers it starts)


def _parsed(parse, value: str):
    """Run a parser of ``callid_core``; its :class:`BadValue` becomes click's usage error."""
    try:
        return parse(value)
    except BadValue as exc:
        raise typer.BadParameter(str(exc)) from None


def _size(value: str) -> int:
    return _parsed(parse_size, value)


def _duration(value: str) -> float:
    return _parsed(parse_duration, value)


def _out_dir(value: str | Path) -> Path:
    """A directory to write into; an empty name is refused (it would mean the current directory)."""
    if not str(value).strip():
        raise typer.BadParameter("an empty name (-d . is the current directory)")
    return Path(value)


def _layout(value: str) -> str:
    from callid_core.ids import Layout

    return str(_parsed(Layout.parse, value))


def _size_option(help_text: str, default: int, was: bool = False) -> typer.models.OptionInfo:
    """A size option (``was``: None, the traced run's value, is its default)."""
    shown = format_size(default)
    return typer.Option(parser=_size, metavar="SIZE", help=help_text + " (e.g. 65536, 64KiB, 1MiB)",
                        show_default=f"the traced run's, else {shown}" if was else shown)


DbPath = Annotated[Path, typer.Argument(metavar="DB", help="merged output of 'callid merge' (a DuckDB "
                                        "file, or a directory with --storage parquet)", show_default=False)]
JsonFlag = Annotated[bool, typer.Option(
    "--json", help="print the summary as JSON (for scripts; integers beyond 2^53 as strings)")]
Ranks = Annotated[int, typer.Option("-n", "--np", min=1, metavar="N", help="MPI ranks")]
_SERVERS_HELP = "I/O servers (plus one metadata server)"
_STRIP_HELP = "simple_stripe strip: bytes of a file each I/O server holds in turn"
_FLOW_HELP = "bytes a server moves per flow buffer (one Trove operation each)"
_SMALL_HELP = "largest share per server that travels inside the request (small I/O); 0 disables"
_LAYOUT_HELP = "bits of a CallID and of its rank part, e.g. 64/23 or the thesis' 32/8"
Servers = Annotated[int, typer.Option(min=1, metavar="N", help=_SERVERS_HELP)]
StripSize = Annotated[int, _size_option(_STRIP_HELP, defaults.DEFAULT_STRIP_SIZE)]
FlowBuffer = Annotated[int, _size_option(_FLOW_HELP, defaults.DEFAULT_FLOW_BUFFER)]
SmallIo = Annotated[int, _size_option(_SMALL_HELP, defaults.DEFAULT_SMALL_IO)]
CallidLayout = Annotated[str, typer.Option(parser=_layout, metavar="TOTAL/RANK", help=_LAYOUT_HELP)]
_PAYLOAD_HELP = ("what the file system's data operations move and store: full, the bytes (files read back "
                 "what was written); none, their sizes only (no data travels or is stored: files grow "
                 "sparsely, reads return nothing), with the same requests, flows, Trove operations, "
                 "arrows, fan-out and imbalance as full, for I/O larger than the disk (times then measure "
                 "the simulator moving no data)")
PayloadOption = Annotated[Payload, typer.Option(help=_PAYLOAD_HELP)]
#: (the defaults of the file-system options, as the command line reads them)
_STRIP_SIZE, _FLOW_BUFFER, _SMALL_IO = (format_size(v) for v in (
    defaults.DEFAULT_STRIP_SIZE, defaults.DEFAULT_FLOW_BUFFER, defaults.DEFAULT_SMALL_IO))
Force = Annotated[bool, typer.Option(
    "--force", help="replace an existing output that callid did not write (never one of the inputs)")]
Timeout = Annotated[float | None, typer.Option(
    metavar="SECONDS", help="give up on the ranks after this many seconds", show_default="none")]
DiskModelOpt = Annotated[str, typer.Option(
    "--disk-model", metavar="SPEC", help="model every server's disk: at most QUEUE operations at once, each "
    "taking LATENCY + bytes / BANDWIDTH (or its real time, if longer), e.g. latency=5ms,bandwidth=200MiB/s,"
    "queue=4", show_default="none: the real files' own speed")]
NetModelOpt = Annotated[str, typer.Option(
    "--net-model", metavar="SPEC", help="model every server's network link (each direction): one message at "
    "a time, each taking LATENCY + bytes / BANDWIDTH, e.g. latency=50us,bandwidth=1GiB/s",
    show_default="none: the sockets' own speed")]
FaultOpt = Annotated[list[str] | None, typer.Option(
    "--fault", metavar="WHO:WHAT", help="plant a fault in a server or a rank (repeatable): io1:disk=slow:20x "
    "(its disk operations 20 times as long), io1:link=slow:20x (its messages 20 times as long on its link; "
    "without --net-model, a link of 50us and 1GiB/s), meta0:load=20x (its metadata operations), "
    "io0:pause=2s@1s (serves nothing for 2 s from 1 s after its first request), io1:full=16MiB (writes fail "
    "with ENOSPC beyond 16 MiB written), rank3:straggle=50ms (rank 3 comes 50 ms late to each of its MPI-IO "
    "calls; in a replay, a source rank); recorded in the run's configuration, never read by the analyses",
    show_default=False)]


#: what a run (callid run, replay, demo) writes in its directory, beside what only it makes
RUN_OUTPUTS = ("client.parquet", "server.parquet", "fs.json")


def _guard_dir(out_dir: Path, names: tuple[str, ...], inputs: list, force: bool) -> None:
    """Refuse a run directory whose outputs would replace inputs or files callid did not write."""
    if out_dir.exists() and not out_dir.is_dir():
        raise InputError(f"{out_dir}: is not a directory")
    for name in names:
        kind = {"fs.json": outputs.RUN_CONFIG, "merged.duckdb": outputs.MERGED}.get(name, outputs.LOG)
        guard_output(out_dir / name, kind, inputs, force)


def _echo_json(value: object) -> None:
    """Print ``value`` as JSON; integers beyond 2^53 as strings (exact for JavaScript readers)."""
    from callid_core import jsonout

    typer.echo(jsonout.dumps(value))


def _run_traced(opts):
    """``callid.run.run``; a bad --clock-skew is a usage error naming the option."""
    from callid.run import run
    from callid_core.clock import SkewError

    try:
        return run(opts)
    except SkewError as exc:
        raise BadValue(f"--clock-skew: {exc}") from None


#: the options of ``callid run`` that a file system of ``callid fs init`` fixes (``run --fs``)
_FS_OPTIONS = {"servers": "--servers", "strip_size": "--strip-size", "flow_buffer": "--flow-buffer",
               "callid_layout": "--callid-layout", "clock_skew": "--clock-skew", "payload": "--payload",
               "server_layers": "--server-layers"}
FsConfig = Annotated[Path, typer.Option(
    "--config", metavar="FS_JSON", envvar=defaults.CONFIG_ENV, show_envvar=True,
    help="the file system's configuration (written by callid fs init)")]


def _refuse_fs_options(ctx: typer.Context) -> None:
    """``run --fs``: an option the file system fixes, given on the command line, is an error."""
    for name, flag in _FS_OPTIONS.items():
        source = ctx.get_parameter_source(name)
        if source is not None and source.name == "COMMANDLINE":
            how = "callid servers events" if name == "server_layers" else "callid fs init"
            raise BadValue(f"{flag}: the file system of --fs has its own (set it with {how})")


@app.command(cls=_Command,
             context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True})
def run(
    ctx: typer.Context,
    target: Annotated[list[str] | None, typer.Argument(
        metavar="SCRIPT [ARGS]...", help="the program and its arguments (with -m: the module's arguments)",
        show_default=False)] = None,
    module: Annotated[str | None, typer.Option(
        "-m", "--module", metavar="MODULE", help="run a module, as python -m")] = None,
    np: Ranks = defaults.DEFAULT_RANKS,
    servers: Servers = defaults.DEFAULT_IO_SERVERS,
    strip_size: StripSize = _STRIP_SIZE,
    flow_buffer: FlowBuffer = _FLOW_BUFFER,
    small_io: SmallIo = _SMALL_IO,
    callid: Annotated[bool, typer.Option(
        "--callid/--no-callid", help="stamp and propagate CallIDs (off: trace the same calls only)")] = True,
    callid_layout: CallidLayout = str(DEFAULT_LAYOUT),
    mount: Annotated[list[str] | None, typer.Option(
        metavar="PREFIX", help="path prefix of the simulated file system (repeatable)",
        show_default=defaults.DEFAULT_MOUNT)] = None,
    ranks_per_host: Annotated[int, typer.Option(
        min=0, metavar="N", help="group ranks into simulated hosts of this size (0: one host)")] = 0,
    clock_skew: Annotated[str, typer.Option(
        metavar="SPEC", help="give clocks an offset and drift, e.g. server:0=+40ms@30ppm,host:1=-3ms@-12ppm "
        "(server:N is ioN; host:N needs --ranks-per-host)")] = "",
    disk_model: DiskModelOpt = "",
    net_model: NetModelOpt = "",
    fault: FaultOpt = None,
    out_dir: Annotated[Path, typer.Option(
        "-d", "--out-dir", parser=_out_dir, metavar="DIR",
        help="directory for the logs and the file system")
    ] = Path("callid-out"),
    timeout: Timeout = None,
    fs: Annotated[Path | None, typer.Option(
        "--fs", metavar="FS_JSON", help="use the servers of this file system (callid fs init), which run "
        "already (callid servers start) and go on running; their logs of the run are collected",
        show_default=False)] = None,
    payload: PayloadOption = Payload.FULL,
    server_layers: Annotated[str, typer.Option(
        metavar="LAYERS", help="the server event layers logged, comma-separated (the event mask; callid "
        "servers events changes it at run time)")] = ",".join(SERVER_LAYERS),
    flush_rows: Annotated[int, typer.Option(
        min=1, max=1 << 20, metavar="N", help="rows a rank's or server's log holds in memory before it "
        "writes them (1: every row at once, for a program that crashes; rows are also written every second)")
    ] = defaults.DEFAULT_FLUSH_ROWS,
    trace_hints: Annotated[bool, typer.Option(
        "--trace-hints/--no-trace-hints", help="log the MPI_Info hints of open, set_view, set_info and "
        "delete (off: callid check's hint checks are not decidable)")] = True,
    trace_mpi: Annotated[bool, typer.Option(
        "--trace-mpi/--no-trace-mpi", help="log the collective MPI calls without I/O, e.g. MPI_Barrier "
        "(off: the consistency-race check D502 is not decidable)")] = True,
    trace_nested: Annotated[bool, typer.Option(
        "--trace-nested/--no-trace-nested", help="log the MPI calls the MPI-IO makes inside each traced call "
        "(table nested_calls, with the call's CallID): ROMIO's communication with --mpi-io romio, callid's "
        "own MPI-IO's collectives otherwise; HDTrace's nested calls")] = False,
    mpi_io: Annotated[MpiIo | None, typer.Option(
        "--mpi-io", help="the MPI-IO the calls go through: callid's own (Python "
        "programs) or the MPI library's, ROMIO (any program: an interposition library stamps its MPI_File "
        "calls and a FUSE mount at --mount takes its I/O to the servers)",
        show_default="callid for a .py script or -m, romio for an executable")] = None,
    mpicc: Annotated[str | None, typer.Option(
        metavar="MPICC", help="--mpi-io romio: the MPICH-ABI compiler wrapper the interposition library is "
        "built with (once, then cached)", show_default="the mpich wheel's")] = None,
    force: Force = False,
    as_json: JsonFlag = False,
) -> None:
    """Run an MPI program traced, on a simulated striped file system.

    Starts one metadata server and --servers I/O servers on loopback, runs the
    ranks with the mpich wheel's mpiexec, stops the servers and writes
    DIR/client.parquet and DIR/server.parquet.  A Python script runs on callid's
    own MPI-IO; an executable (C, C++, Fortran, HDF5: any language) runs on its
    MPI library's, with the file system mounted at --mount for the run's
    processes only.  With --fs, the servers of that file system run already,
    on any host; the run asks them to flush their logs and takes the parts
    written while it ran.

    Example: callid run -n 2 --servers 2 examples/callid_demo.py
    """
    from callid.run import RunOptions

    if fs is not None:
        _refuse_fs_options(ctx)
    if module:
        target = ["-m", module, *(target or [])]
    if not target:
        raise BadValue("nothing to run: give SCRIPT [ARGS...] or -m MODULE [ARGS...]")
    if not module and not Path(target[0]).is_file() and (target[0].endswith(".py") or "/" in target[0]
                                                         or not shutil.which(target[0])):
        if target[0].startswith("-"):  # (options after the first unknown one reach the target)
            raise BadValue(f"no such option: {target[0]} (see 'callid run --help')")
        raise BadValue(f"{target[0]}: no such {'script' if target[0].endswith('.py') else 'program'}")
    _guard_dir(out_dir, RUN_OUTPUTS, ([] if module else [target[0]]) + ([fs] if fs else []), force)
    opts = RunOptions(target=target, np=np, servers=servers, strip_size=strip_size,
                      flow_buffer=flow_buffer, small_io=small_io,
                      callid=callid, callid_layout=callid_layout, mount=mount or [defaults.DEFAULT_MOUNT],
                      ranks_per_host=ranks_per_host, clock_skew=clock_skew, disk_model=disk_model,
                      net_model=net_model, faults=fault or [], out=str(out_dir),
                      timeout=timeout, stdout_to_stderr=as_json, fs=str(fs) if fs else "",
                      mpi_io=mpi_io, mpicc=mpicc, payload=payload,
                      server_layers=parse_layers(server_layers, "--server-layers"), flush_rows=flush_rows,
                      trace_hints=trace_hints, trace_mpi=trace_mpi, trace_nested=trace_nested)
    result = _run_traced(opts)
    if as_json:
        _echo_json({"out_dir": result.out, "client": result.client, "server": result.server,
                    "client_rows": result.client_rows, "server_rows": result.server_rows,
                    "seconds": round(result.seconds, 3)})
        return
    typer.echo(f"callid: run finished in {result.seconds:.1f} s: {result.client_rows} client rows, "
               f"{result.server_rows} server events", err=True)
    typer.echo(f"  client log: {result.client}\n  server log: {result.server}", err=True)
    typer.echo(f"next: callid merge {result.client} {result.server} -o {out_dir / 'merged.duckdb'}", err=True)


def _group(name: str, help_text: str) -> typer.Typer:
    """A group of commands: ``callid NAME COMMAND``."""
    group = typer.Typer(name=name, help=help_text, no_args_is_help=True, rich_markup_mode=None)
    app.add_typer(group)
    return group


fs_app = _group("fs", "A file system whose servers run on any host: its configuration and secret.\n\n"
                "Example: callid fs init --servers node1:io0,node2:io1 -o fs.json")


@fs_app.command("init", cls=_Command)
def fs_init(
    servers: Annotated[str, typer.Option(
        "--servers", metavar="HOST[:PORT]:NAME,...", help="where each server listens: meta0 and io0 ... "
        "ioN-1 (meta0 not named: on the first host); a port not given is the first free one from --port",
        show_default=False)],
    output: Annotated[Path, typer.Option(
        "-o", "--output", metavar="FS_JSON", help="the configuration to write; the secret goes beside it "
        "(fs.json: fs.secret, readable by its owner only)")] = Path("fs.json"),
    server_dir: Annotated[Path | None, typer.Option(
        "--server-dir", metavar="DIR", help="each server's directory (storage, log, pid file) is DIR/NAME "
        "on its host", show_default="servers beside the configuration")] = None,
    port: Annotated[int, typer.Option(
        min=1, max=65535, metavar="PORT", help="first TCP port of the servers on each host")
    ] = defaults.DEFAULT_PORT,
    strip_size: StripSize = _STRIP_SIZE,
    flow_buffer: FlowBuffer = _FLOW_BUFFER,
    callid_layout: CallidLayout = str(DEFAULT_LAYOUT),
    payload: PayloadOption = Payload.FULL,
    disk_model: DiskModelOpt = "",
    net_model: NetModelOpt = "",
    fault: FaultOpt = None,
    force: Force = False,
    as_json: JsonFlag = False,
) -> None:
    """Write the configuration of a file system whose servers run on any host.

    The fs.conf/pvfs2tab of this system: each server's address, role and
    directory, the striping, and a new secret every client must prove it holds
    (a server refuses any other), and the servers' disk and network models and
    faults (every run on it records them).  Start the servers with callid servers start
    on each host, then run with callid run --fs FS_JSON (or set CALLID_CONFIG
    for ranks started by another launcher: srun python -m callid.launch app.py).

    Example: callid fs init --servers node1:io0,node2:io1 -o fs.json
    """
    from callid.run import RunOptions, init_fs
    from callid_core.config import secret_beside

    if not output.parent.is_dir():
        raise InputError(f"{output}: directory {output.parent} does not exist")
    guard_output(output, outputs.CONFIG, [], force)
    secret = secret_beside(output)
    if secret == output:
        raise BadValue(f"-o: {output} is the name of the secret's file; name the configuration e.g. fs.json")
    if secret.exists() and not force:
        raise InputError(f"{secret}: exists (the secret of a file system); choose another -o, or add --force "
                         "to replace it (its servers then refuse every client until they restart)")
    config = init_fs(servers, output, server_dir, RunOptions(
        target=[], strip_size=strip_size, flow_buffer=flow_buffer, callid_layout=callid_layout,
        payload=payload, disk_model=disk_model, net_model=net_model, faults=fault or []), port)
    if as_json:
        _echo_json({"config": str(output), "secret_file": config.secret_file,
                    "servers": [{"server": s.name, "address": f"{s.host}:{s.port}", "roles": s.roles,
                                 "dir": s.home} for s in config.servers]})
        return
    for srv in config.servers:
        typer.echo(f"{srv.name:<8}{f'{srv.host}:{srv.port}':<22}{srv.home}")
    typer.echo(f"callid: wrote {output} and its secret {config.secret_file} (owner only)", err=True)
    typer.echo(f"next: callid servers start --config {output}   (on each server's host)", err=True)


servers_app = _group("servers", "Start, stop and look at the servers of a file system of callid fs init "
                     "on this host.\n\nExample: callid servers start --config fs.json; callid servers status "
                     "--config fs.json")
ServerNames = Annotated[list[str] | None, typer.Option(
    "--name", metavar="NAME", help="only this server (repeatable)", show_default="all of this host")]


@servers_app.command("start", cls=_Command)
def servers_start(config: FsConfig = Path("fs.json"), name: ServerNames = None) -> None:
    """Start the servers of a file system that have an address of this host.

    Each runs in the background, from its directory (its storage, its log parts,
    NAME.addr with its process id, NAME.log with its output), until callid
    servers stop.  The command returns once every server answers.

    Example: callid servers start --config fs.json --name io0
    """
    from callid.run import start_servers

    for srv in start_servers(config, name):
        typer.echo(f"started {srv.name} on {srv.host}:{srv.port} (its directory: {srv.home})")


@servers_app.command("stop", cls=_Command)
def servers_stop(config: FsConfig = Path("fs.json"), name: ServerNames = None) -> None:
    """Stop the servers of a file system that run on this machine.

    Each gets SIGTERM, flushes its log into its directory's parts/ and ends
    (killed after 20 s).  The logs of runs made with callid run --fs are in
    their run directories already.

    Example: callid servers stop --config fs.json
    """
    from callid import servers
    from callid_core.config import Config

    fs = Config.load(config)
    chosen = [fs.server(n) for n in name] if name else [
        s for s in fs.servers if servers.running_pid(s) is not None]
    if not chosen:
        raise Failed(f"no server of {config} runs on this machine")
    done, failures = servers.stop(chosen)
    for line in done:
        typer.echo(line)
    if failures:
        raise Failed("; ".join(failures))


@servers_app.command("status", cls=_Command)
def servers_status(config: FsConfig = Path("fs.json"), as_json: JsonFlag = False) -> None:
    """Say where each server of a file system listens, its process, and whether it answers.

    A server answers when a connection proving the file system's secret gets a
    reply to a ping.  Exit status 1 when one does not answer.

    Example: callid servers status --config fs.json
    """
    from callid.run import server_status
    from callid_core.config import Config

    rows = server_status(Config.load(config))
    if as_json:
        _echo_json(rows)
    else:
        for row in rows:
            state = "answers" if row["answers"] else "does not answer"
            typer.echo(f"{row['server']:<8}{row['address']:<22}{state:<17}{row['process']}")
    if not all(row["answers"] for row in rows):
        raise typer.Exit(EXIT_FAILED)


@servers_app.command("events", cls=_Command)
def servers_events(
    config: FsConfig = Path("fs.json"), name: ServerNames = None,
    layers: Annotated[str | None, typer.Option(
        "--layers", metavar="LAYERS", help="log only these layers from now on, comma-separated, of "
        f"{','.join(SERVER_LAYERS)} ('' for none)", show_default="say which layers each server logs")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Say or set which event layers the running servers log (the event mask), at run time.

    A server logs the change itself (an event of layer log, op event_mask), so
    a merged run says which layers were not logged, and from when.

    Example: callid servers events --config fs.json --layers req,trove
    """
    from callid.server_wire import event_mask
    from callid_core.config import Config

    fs = Config.load(config)
    chosen = [fs.server(n) for n in name] if name else fs.servers
    wanted = None if layers is None else parse_layers(layers, "--layers")
    rows = [{"server": s.name, "layers": event_mask(s, fs.secret(), wanted)} for s in chosen]
    if as_json:
        _echo_json(rows)
    else:
        for row in rows:
            typer.echo(f"{row['server']:<8}{','.join(row['layers']) or '(none)'}")


@app.command(cls=_Command)
def replay(
    source: Annotated[Path, typer.Argument(
        metavar="LOG", help="a Darshan log with DXT traces (DXT_MPIIO, or DXT_POSIX for files without "
        "MPI-IO records), or the client.parquet of a traced run", show_default=False)],
    out_dir: Annotated[Path, typer.Option(
        "-d", "--out-dir", parser=_out_dir, metavar="DIR",
        help="directory for the logs, the schedule and the file system")
    ] = Path("callid-replay"),
    procs: Annotated[int, typer.Option(
        min=1, metavar="N", help="replayer processes (under mpiexec); each drives the source ranks r "
        "with r mod N = its number")] = 2,
    lanes: Annotated[int, typer.Option(
        min=0, metavar="N", help="calls in flight per replayer process (threads, each with its own "
        "connections): a source rank whose call is due waits only when all are busy (its lag says "
        f"how long); 0: one per source rank the process drives, at most {defaults.MAX_REPLAY_LANES} and "
        f"{defaults.DEFAULT_MAX_CONNECTIONS} / --procs (the connections a server takes)")] = 0,
    timing: Annotated[Timing, typer.Option(
        help="asap: each call as soon as the last one of its rank ended, in the source's order; "
        "original: at its time in the source run, each rank's gaps kept (times --time-scale); each call "
        "logs its source times and its lag (how long after due it started)")
    ] = Timing.ASAP,
    time_scale: Annotated[float, typer.Option(
        min=0, metavar="FACTOR", help="with --timing original: multiply the source's times by this")] = 1.0,
    ranks: Annotated[str | None, typer.Option(
        metavar="LIST", help="replay only these source ranks, e.g. 0-63,128", show_default="all")] = None,
    files: Annotated[list[str] | None, typer.Option(
        "--files", metavar="PATTERN", help="replay only files whose source name matches (fnmatch, e.g. "
        "'*.h5'; repeatable)", show_default="all")] = None,
    window: Annotated[str | None, typer.Option(
        metavar="START:END", help="replay only accesses that started in this window of the source run, "
        "e.g. 2s:10s or :500ms", show_default="all")] = None,
    hint: Annotated[list[str] | None, typer.Option(
        metavar="KEY=VALUE", help="MPI_Info hint of every file (repeatable; over a traced run's own, "
        "Darshan records none): cb_nodes, cb_buffer_size, romio_cb_write, romio_cb_read, striping_factor, "
        "striping_unit")] = None,
    servers: Annotated[int | None, typer.Option(
        min=1, metavar="N", help=_SERVERS_HELP, show_default=f"the traced run's, else "
        f"{defaults.DEFAULT_IO_SERVERS}")] = None,
    strip_size: Annotated[int | None, _size_option(
        _STRIP_HELP, defaults.DEFAULT_STRIP_SIZE, was=True)] = None,
    flow_buffer: Annotated[int | None, _size_option(
        _FLOW_HELP, defaults.DEFAULT_FLOW_BUFFER, was=True)] = None,
    small_io: Annotated[int | None, _size_option(_SMALL_HELP, defaults.DEFAULT_SMALL_IO, was=True)] = None,
    callid_layout: Annotated[str | None, typer.Option(
        parser=_layout, metavar="TOTAL/RANK", help=_LAYOUT_HELP,
        show_default=f"the traced run's, else {DEFAULT_LAYOUT}")] = None,
    mount: Annotated[str, typer.Option(
        metavar="PREFIX", help="the source's files are put under this prefix, by their full names (names "
        "already under it stay)")] = defaults.DEFAULT_MOUNT,
    ranks_per_host: Annotated[int | None, typer.Option(
        min=0, metavar="N", help="ranks per simulated host (the default cb_nodes is one aggregator per "
        "host)", show_default="the traced run's, or from a Darshan log's host names")] = None,
    prefill: Annotated[bool, typer.Option(
        "--prefill/--no-prefill", help="first write the files the source reads before writing them, up to "
        "the end of their last read (calls marked inferred 'prefill'), so that reads find data")] = True,
    payload: Annotated[Payload, typer.Option(
        help=_PAYLOAD_HELP + "; full refuses a replay whose writes (prefill included) need more than the "
        "free space of DIR")] = Payload.FULL,
    disk_model: DiskModelOpt = "",
    net_model: NetModelOpt = "",
    fault: FaultOpt = None,
    timeout: Timeout = None,
    force: Force = False,
    as_json: JsonFlag = False,
) -> None:
    """Replay the MPI-IO accesses of a Darshan DXT log, or of a traced run, with CallIDs.

    Every access becomes one call of its source rank (same file, offset and
    length, or the same file ranges of a non-contiguous view, in each rank's
    order; MPI_File_write_at / read_at, _all for collective calls), so merge,
    stats, view and export show what the I/O does on each storage server.

    A Darshan log: what DXT does not say is inferred and marked (the calls'
    'inferred' column, counted by callid stats): collective calls (when the MPI-IO
    counters say all of a file's writes, or reads, were collective, the k-th
    segment of each rank is its part of the k-th collective call), contiguous
    ranges (after MPI_File_set_view), one open of each file by its lowest rank,
    and prefill writes.  Darshan records no hint values: give them with --hint.

    A traced run (its client.parquet): the same calls, collective grouping and
    hints, under the run's file-system layout unless options change it, to ask
    "what if" (compare with: callid stats A.duckdb B.duckdb).

    Writes DIR/client.parquet and DIR/server.parquet, as callid run does; the run
    table of the merged database names the source (client.source).

    Example: callid replay app.darshan --servers 8 --hint cb_nodes=4
    Example: callid replay callid-out/client.parquet --servers 8 --strip-size 1MiB -d wide
    """
    from callid.replay.job import ReplayOptions
    from callid.replay.job import replay as do_replay
    from callid_core.units import parse_ranks, parse_window

    hints = {}
    for item in hint or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadValue(f"--hint: {item!r} is not KEY=VALUE, e.g. cb_nodes=4")
        hints[key] = value
    _guard_dir(out_dir, RUN_OUTPUTS, [source], force)
    opts = ReplayOptions(
        source=str(source), out=str(out_dir), procs=procs, lanes=lanes, timing=timing, time_scale=time_scale,
        ranks=parse_ranks(ranks) if ranks else None, files=files or [],
        window=parse_window(window) if window else None, hints=hints, servers=servers,
        strip_size=strip_size, flow_buffer=flow_buffer, small_io=small_io, callid_layout=callid_layout,
        mount=mount, ranks_per_host=ranks_per_host, prefill=prefill, payload=payload, timeout=timeout,
        disk_model=disk_model, net_model=net_model, faults=fault or [])
    with _bar("replaying", quiet=as_json) as opts.on_progress:
        result = do_replay(opts)
    run = result.run
    summary = {"out_dir": str(run.out), "client": str(run.client), "server": str(run.server),
               "calls": result.calls, "collective_calls": result.collectives, "ranks": result.ranks,
               "files": result.files, "processes": result.procs, "ranks_per_host": result.ranks_per_host,
               "segments": result.segments, "client_rows": run.client_rows, "server_rows": run.server_rows,
               "seconds": round(run.seconds, 3), "calls_per_second": round(result.calls / run.seconds, 1),
               "payload": Payload(payload).value, "notes": result.notes}
    if as_json:
        _echo_json(summary)
        return
    typer.echo(f"callid: replayed {result.calls} calls ({result.collectives} collective) of {result.ranks} "
               f"ranks on {result.files} files in {run.seconds:.1f} s ({summary['calls_per_second']} "
               f"calls/s, {result.procs} replayer processes): {run.client_rows} client rows, "
               f"{run.server_rows} server events", err=True)
    if payload == Payload.NONE:
        from pipeline.source import PAYLOAD_NONE_TIMES

        typer.echo(f"  payload none: {PAYLOAD_NONE_TIMES}", err=True)
    for note in result.notes:
        typer.echo(f"  note: {note}", err=True)
    typer.echo(f"  client log: {run.client}\n  server log: {run.server}", err=True)
    typer.echo(f"next: callid merge {run.client} {run.server} -o {out_dir / 'merged.duckdb'}", err=True)


@app.command(cls=_Command)
def merge(
    client: Annotated[str, typer.Argument(
        metavar="CLIENT_LOG", help="client log: a file, a directory or a glob of parts", show_default=False)],
    server: Annotated[str, typer.Argument(
        metavar="SERVER_LOG", help="server log: a file, a directory or a glob of parts", show_default=False)],
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", metavar="PATH", help="merged output to write",
        show_default="merged.duckdb (or merged/) next to CLIENT_LOG")] = None,
    storage: Annotated[Storage, typer.Option(
        help="duckdb: one database file; parquet: a directory with one Parquet file per table")
    ] = Storage.DUCKDB,
    memory_limit: Annotated[str | None, typer.Option(
        metavar="SIZE", help="DuckDB memory limit, e.g. 4GB; beyond it the merge spills to disk "
        "(--engine spark: the Spark driver's memory)",
        show_default="half of the RAM; spark: 4GB")] = None,
    clock_sync: Annotated[ClockSync, typer.Option(
        help="clock model: none (times as logged), offset, or offset and drift per time window")
    ] = ClockSync.DRIFT,
    engine: Annotated[Engine, typer.Option(
        help="what runs the merge: an embedded DuckDB, or Apache Spark for traces larger than one "
        "machine merges (pip install 'callid[spark]'; needs Java 17+); the output is the same")
    ] = Engine.DUCKDB,
    master: Annotated[str | None, typer.Option(
        metavar="URL", help="--engine spark: the cluster's master URL, e.g. spark://head:7077",
        show_default="local[*]: this machine's cores")] = None,
    description: Annotated[str, typer.Option(
        metavar="TEXT", help="what you say of this run (the workload, the settings tried), kept in the run "
        "table as 'description' and shown by stats and the report", show_default="none")] = "",
    force: Force = False,
    as_json: JsonFlag = False,
) -> None:
    """Merge client and server logs into calls, arrows (call -> disk operation) and fan-out.

    Every clock is aligned onto rank 0's host clock from causal constraints
    (requests are received after they are sent, responses before they arrive,
    requests start after their calls); the clocks table gives each clock's offset,
    drift, guaranteed bound and causality violations before and after.

    The output is written under a temporary name and renamed at the end: on any
    error nothing is written.

    Example: callid merge callid-out/client.parquet callid-out/server.parquet -o merged.duckdb
    """
    from callid import api

    if output is None:
        base = Path(client)
        output = (base if base.is_dir() else base.parent) / (
            "merged.duckdb" if storage == Storage.DUCKDB else "merged")
    guard_output(output, outputs.MERGED, [client, server, *glob.glob(client), *glob.glob(server)], force)
    with _steps("merging", quiet=as_json) as on_step:
        summary = api.merge(client, server, output, memory_limit=memory_limit, storage=storage.value,
                            clock_sync=clock_sync.value, on_step=on_step, engine=engine.value, master=master,
                            description=description)
    warnings = api.merge_warnings(output)
    if as_json:
        _echo_json({"output": str(output), **summary, "warnings": warnings})
        return
    # (a table only some runs have is said when it has rows: source_io a replay's, datatypes a traced run's,
    # nested_calls a run's with --trace-nested)
    counts = ", ".join(f"{v} {k}" for k, v in summary.items()
                       if isinstance(v, int) and (v or k not in ("source_io", "datatypes", "nested_calls")))
    typer.echo(f"callid: wrote {output} ({counts})")
    for warning in warnings:
        typer.echo(f"callid: warning: {warning}", err=True)
    typer.echo(f"next: callid stats {output}", err=True)


@app.command(cls=_Command)
def stats(
    dbs: Annotated[list[Path], typer.Argument(
        metavar="DB...", help="merged output(s); several are compared side by side", show_default=False)],
    as_json: JsonFlag = False,
) -> None:
    """Print the thesis' statistics and fan-out, fan-in, per-server and attribution figures.

    With several databases (e.g. the same workload with collective buffering on and
    off) the figures are printed side by side; --json prints a list.

    Example: callid stats merged.duckdb --json
    """
    from callid import api
    from pipeline.stats import render_comparison, render_stats

    figures = []
    with _steps("stats", quiet=as_json) as step:
        for db in dbs:
            step(str(db))
            figures.append(api.stats(db))
    if as_json:
        _echo_json(figures[0] if len(figures) == 1 else figures)
    elif len(figures) == 1:
        typer.echo(render_stats(figures[0]))
    else:
        typer.echo(render_comparison([str(db) for db in dbs], figures))


@app.command(cls=_Command)
def check(
    db: Annotated[Path | None, typer.Argument(
        metavar="DB", help="merged output of 'callid merge'", show_default=False)] = None,
    code: Annotated[list[str] | None, typer.Option(
        "--code", metavar="CODE", help="run only this check (repeatable), e.g. D502",
        show_default="all")] = None,
    list_checks: Annotated[bool, typer.Option(
        "--list", help="list the checks (code, severity, what each detects) and exit")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Check the traced MPI-IO calls against MARMOT's catalogue of usage errors and consistency races.

    Every check is a SQL query over the merged tables (see --list, and docs/checks.md):
    collective calls in different order or with different arguments on the ranks,
    files deleted while open or left open, pending operations at close, hints,
    access modes, views, reads of never-written regions, and consistency races
    (overlapping accesses of two ranks, one writing, in non-atomic mode, without
    sync-barrier-sync between them).  Findings are grouped by code with counts.

    On a replay, a check needing what its source does not record (a Darshan log records no
    closes, barriers, hints, ...) is listed as not decidable from this source, not run.

    Exit status: 0 no error found, 1 an error-severity finding, 2 bad usage or input.

    Example: callid check merged.duckdb --json
    """
    from callid import api
    from pipeline.checks import CHECKS, count_findings, render_findings

    if list_checks:
        _listing(CHECKS, as_json)
        return
    if db is None:
        raise BadValue("give the merged database to check (or --list)")
    with _steps("check", quiet=as_json) as step, api.open(db) as m:
        step(str(db))
        results = api.check(m, code)
        text = render_findings(results, m.layout)
    if as_json:
        _echo_json(results.as_json())
    else:
        typer.echo(text)
    if count_findings(results.findings)["error"]:
        raise typer.Exit(EXIT_FAILED)


@app.command(cls=_Command)
def insights(
    dbs: Annotated[list[Path] | None, typer.Argument(
        metavar="DB...", help="merged output of 'callid merge' (two are compared: what appeared, "
        "disappeared, changed), or a Darshan log (its counters, no replay needed)",
        show_default=False)] = None,
    code: Annotated[list[str] | None, typer.Option(
        "--code", metavar="CODE", help="run only this insight (repeatable), e.g. S801",
        show_default="all")] = None,
    list_insights: Annotated[bool, typer.Option(
        "--list", help="list the insights (code, family, what each finds) and exit; with a Darshan "
        "log's name, those computed on Darshan logs")] = False,
    verbose: Annotated[bool, typer.Option(
        "--verbose", help="print each recommendation's example too (a hint, an option, an MPI-IO or "
        "HDF5 call; as Drishti's --verbose; --json always has them)")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Diagnose the run: findings with severity, the numbers behind them and what to change.

    Client-side insights use Drishti's triggers and thresholds (small, misaligned and random
    requests, read/write mix, rank imbalance and stragglers, no collective I/O, metadata
    time); server-side insights use every disk operation and the call that caused it
    (server load imbalance and the layout behind it, strip crossings, partial flow buffers,
    disk-operation size, aggregator hot spots, read-modify-write, redundant reads, the
    metadata server's share, client-dominated calls, stragglers with the slow disk operation).
    Severities are Drishti's: high, warning, ok, info.  docs/insights.md lists them all with
    their thresholds.  With two databases, prints the insights that appeared, disappeared or changed.

    On a Darshan log (callid insights app.darshan), Drishti's insights (its 32 codes: STDIO use,
    the POSIX module's P01-P22, the MPI-IO module's M01-M10) from the log's counters, each
    finding naming Drishti's code beside callid's; docs/insights.md lists them.

    Exit status: 0 done (whatever was found), 2 bad usage or input.

    Example: callid insights merged.duckdb --json
    """
    from callid import api
    from callid_core.darshan_file import is_darshan_log
    from pipeline.insights import (
        DARSHAN_INSIGHTS,
        INSIGHTS,
        compare_insights,
        count_insights,
        render_comparison,
        render_insights,
    )

    darshan = bool(dbs) and any(is_darshan_log(db) for db in dbs)
    catalogue = DARSHAN_INSIGHTS if darshan else INSIGHTS
    if list_insights:
        _listing(catalogue, as_json)
        return
    if not dbs or len(dbs) > 2:
        raise BadValue("give one merged database (or two to compare; or --list)")
    if darshan and len(dbs) > 1:
        raise BadValue("give one Darshan log (two runs are compared as merged databases)")
    found, layouts = [], []
    with _steps("insights", quiet=as_json) as step:
        for db in dbs:
            step(str(db))
            if darshan:  # (a Darshan log's counters: no merged output, no CallIDs)
                found.append(api.insights(db, code))
                layouts.append(None)
                continue
            with api.open(db) as m:
                found.append(api.insights(m, code))
                layouts.append(m.layout)
    layout = layouts[0]  # (the first run's, to print CallIDs)
    if len(dbs) == 2:
        if as_json:
            _echo_json({"runs": [str(db) for db in dbs], **compare_insights(*found)})
        else:
            typer.echo(render_comparison([str(db) for db in dbs], *found, layout))
        return
    if as_json:
        _echo_json({"counts": count_insights(found[0]), "findings": found[0]})
    else:
        ran = len(set(code)) if code else len(catalogue.rules())
        typer.echo(render_insights(found[0], ran, layout, examples=verbose,
                                   source=f"the counters of {dbs[0]}" if darshan else ""))


@app.command(cls=_Command)
def why(
    db: Annotated[Path, typer.Argument(
        metavar="DB", help="merged output of 'callid merge'", show_default=False)],
    callid: Annotated[str | None, typer.Argument(
        metavar="CALLID", help="the call, by its CallID as callid prints it (0x000001_0000000003: rank 1, "
        "call 3), or in decimal", show_default="the run's slowest call")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Say why one call took its time: its critical path, its peers, the findings that apply.

    The critical path is walked back from the call's end: the request (of any rank, on the
    call's behalf), collective phase or late rank's arrival that ended last bounds it, then
    the one that ended last before that began, and so on; what none covers is the calling
    rank's own time.  The pieces add up to the call's time.  Each request is split at its
    server: reaching it, queued, on the disks (the disk operation that ended last named),
    the rest of its server time, the reply.  Then: its peers (the calls of the same function
    and size: median, how many were slower), what took most of its time (a server's disks,
    its queue, the network, a rank it waited for, the rank itself), and the insights'
    findings naming the call, a server or rank on its path, or its file, with the first's
    recommendation.  callid report links its slowest calls to this.

    Exit status: 0 done, 2 bad usage or input (no such call).

    Example: callid why merged.duckdb 0x000001_0000000003 --json
    """
    from callid import api
    from pipeline.why import render_why

    with _steps("why", quiet=as_json) as step, api.open(db) as m:
        step(str(db))
        result = api.why(m, callid)
    if as_json:
        _echo_json(result)
    else:
        typer.echo(render_why(result))


def _listing(catalogue, as_json: bool) -> None:
    """``--list`` of checks or insights (a :class:`pipeline.rules.Catalogue`)."""
    rows, text = catalogue.listing()
    if as_json:
        _echo_json(rows)
    else:
        typer.echo(text)


@app.command(cls=_Command)
def sql(
    db: Annotated[Path | None, typer.Argument(
        metavar="DB", help="merged output of 'callid merge' (a DuckDB file, or a directory with --storage "
        "parquet)", show_default=False)] = None,
    query: Annotated[str | None, typer.Argument(
        metavar="QUERY", help="SQL query (or -f FILE, or --query NAME); none: list the tables and views",
        show_default=False)] = None,
    file: Annotated[Path | None, typer.Option(
        "-f", "--file", metavar="FILE", help="read the query from a file")] = None,
    named: Annotated[str | None, typer.Option(
        "-q", "--query", metavar="NAME", help="run a query that ships with callid (see --list-queries)")
    ] = None,
    list_queries: Annotated[bool, typer.Option(
        "--list-queries", help="list the queries that ship with callid and the question each answers")
    ] = False,
    fmt: Annotated[RowFormat, typer.Option(
        "--format", help="how to print the rows (json: integers beyond 2^53, such as CallIDs and "
        "times in ns, as strings, so that JavaScript readers keep them exact)")] = RowFormat.TABLE,
    as_json: Annotated[bool, typer.Option("--json", help="print the rows as JSON (same as --format json)")]
    = False,
    timeout: Annotated[float, typer.Option(
        parser=_duration, metavar="DURATION", help="stop a query still running after this long, e.g. 30s, "
        "10min (0: never; at most 720h)")] = defaults.DEFAULT_SQL_TIMEOUT,
) -> None:
    """Run a SQL query on a merged database (tables: calls, rpcs, server_ops, arrows, fanout, ...).

    Without a query it lists the tables and views with their row counts; --query NAME runs one
    of the queries that ship with callid (--list-queries shows them and what each answers).
    Queries only (SELECT, SHOW, DESCRIBE, SUMMARIZE, EXPLAIN): any other statement is refused, and
    only the output's own files can be read.  Rows are printed as they are read (a table's column
    widths are those of its first 10,000 rows).

    Example: callid sql merged.duckdb "SELECT func, count(*) FROM arrows GROUP BY func"
    """
    from callid import api
    from pipeline.formatting import format_rows
    from pipeline.query import check_timeout, named_queries, named_query, table_counts

    fmt, timeout = (RowFormat.JSON if as_json else fmt), timeout / 1e9  # (seconds)
    check_timeout(timeout)
    if list_queries:
        rows = [(q.name, q.question) for q in named_queries().values()]
        typer.echo(format_rows(["query", "question"], rows, fmt, cut=False))
        return
    if db is None:
        raise BadValue("no database: give DB (or --list-queries)")
    if sum(x is not None for x in (query, file, named)) > 1:
        raise BadValue("give one of QUERY, -f FILE and --query NAME")
    if file is not None:
        query = _query_file(file)
        if not query.strip():
            raise BadValue(f"{file}: no query in the file")
    elif named is not None:
        query = named_query(named).sql
    with api.open(db, sandbox=True) as m:
        if query is None:
            typer.echo(format_rows(["name", "kind", "rows"], table_counts(m), fmt))
            if sys.stdin.isatty() and sys.stdout.isatty():
                _shell(m, fmt, timeout)
            elif fmt == RowFormat.TABLE:
                typer.echo("(give QUERY, -f FILE or --query NAME to run a query; --list-queries)", err=True)
            return
        _interruptible(m.con, functools.partial(_print_query, m, query, fmt, timeout))


def _print_query(m, query: str, fmt: RowFormat, timeout: float) -> None:
    """Print the rows of ``query`` on ``m`` as they are read."""
    from pipeline.formatting import stream_rows
    from pipeline.query import stream_query

    columns, batches = stream_query(m, query, timeout)
    for block in stream_rows(columns, batches, fmt):
        typer.echo(block)


#: the largest query file callid sql reads
MAX_QUERY_FILE = 1 << 20


def _query_file(file: Path) -> str:
    """The text of ``callid sql -f FILE``: a regular file (a FIFO would wait for a writer), at most
    :data:`MAX_QUERY_FILE` bytes of UTF-8 text; :class:`BadValue` saying what it is otherwise."""
    try:
        if not file.is_file():
            raise BadValue(f"{file}: not a regular file" if file.exists() else f"{file}: no such file")
        if file.stat().st_size > MAX_QUERY_FILE:
            raise BadValue(f"{file}: larger than {MAX_QUERY_FILE >> 20} MiB: not a query")
        return file.read_bytes().decode()
    except UnicodeDecodeError as exc:
        raise BadValue(f"{file}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise BadValue(f"{file}: {exc.strerror}") from None


def _shell(m, fmt: RowFormat, timeout: float) -> None:
    """An interactive SQL shell on ``m`` (read-only, sandboxed as every query of callid sql): a query
    ends with ';' (it may span lines); .queries lists the shipped queries, .quit or Ctrl-D leaves."""
    import readline  # noqa: F401  (line editing and history for input())

    from pipeline.formatting import format_rows
    from pipeline.query import QueryError, named_queries

    typer.echo("enter SQL ending with ';' (.queries: the shipped queries, .quit: leave)", err=True)
    text = ""
    while True:
        try:
            line = input("callid> " if not text else "   ...> ")
        except EOFError:
            typer.echo(err=True)
            return
        except (KeyboardInterrupt, Interrupt):  # (Ctrl-C at the prompt: a new line)
            INTERRUPTED.clear()
            typer.echo(err=True)
            text = ""
            continue
        if not text and line.strip() in (".quit", ".exit"):
            return
        if not text and line.strip() == ".queries":
            rows = [(q.name, q.question) for q in named_queries().values()]
            typer.echo(format_rows(["query", "question"], rows, fmt, cut=False))
            continue
        text += line + "\n"
        if not text.rstrip().endswith(";"):
            continue
        try:
            _interruptible(m.con, functools.partial(_print_query, m, text, fmt, timeout))
        except QueryError as exc:
            typer.echo(f"callid: error: {exc}", err=True)
        except Interrupt:
            INTERRUPTED.clear()
            typer.echo("callid: query interrupted", err=True)
        text = ""


def _interruptible(con: Any, work: Callable[[], Any]) -> Any:
    """``work()`` (queries on ``con``) run in a thread while this one waits, so that Ctrl-C is seen at
    once (DuckDB, running a query in this thread, may miss it) and interrupts the query:
    :class:`Interrupt` then, once the query has stopped.  (The wait is on an event, not
    ``Thread.join``: an exception raised in a join marks the thread stopped while it still runs,
    and the process then aborted at exit with the query running.)"""
    import threading

    result: list[Any] = []
    failed: list[BaseException] = []
    done = threading.Event()

    def run() -> None:
        try:
            result.append(work())
        except BaseException as exc:  # noqa: BLE001 (raised again in the waiting thread)
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    try:
        while not done.wait(0.1):
            pass
    except Interrupt:
        con.interrupt()
        while True:  # (until the query has stopped: a second Ctrl-C changes nothing)
            try:
                if done.wait(0.1):
                    break
            except Interrupt:
                con.interrupt()
        raise
    if failed:
        raise failed[0]
    return result[0]


#: off a terminal, work quicker than this prints no progress lines (a batch log gets them for long work)
QUIET_SECONDS = 2.0


@contextmanager
def _bar(title: str, quiet: bool = False):
    """Progress on stderr, yielding its callback ``(done, total)``: a bar on a terminal, else (a batch
    log) one line per tenth done, once the work has taken :data:`QUIET_SECONDS`."""
    if quiet:
        yield None
        return
    if not sys.stderr.isatty():
        import time

        t0, shown = time.monotonic(), [-1]

        def line(done: int, total: int | None) -> None:
            tenth = done * 10 // total if total else -1
            if tenth > shown[0] and time.monotonic() - t0 > QUIET_SECONDS:
                shown[0] = tenth
                typer.echo(f"callid {title}: {tenth * 10}% ({done}/{total})", err=True)

        yield line
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=True) as progress:
        task = progress.add_task(title, total=None)
        yield lambda done, total: progress.update(task, completed=done, total=total)


@contextmanager
def _steps(title: str, quiet: bool = False):
    """Progress on stderr for a chain of named steps, yielding the step callback: a spinner on a
    terminal, else (a batch log) one line per step begun after :data:`QUIET_SECONDS`, with the time."""
    if quiet:
        yield lambda name: None
        return
    if not sys.stderr.isatty():
        import time

        t0 = time.monotonic()

        def line(name: str) -> None:
            if time.monotonic() - t0 > QUIET_SECONDS:
                typer.echo(f"callid {title}: {name} (at {time.monotonic() - t0:.1f} s)", err=True)

        yield line
        return
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  transient=True) as progress:
        task = progress.add_task(title)
        yield lambda name: progress.update(task, description=f"{title}: {name}")


WindowOpt = Annotated[str | None, typer.Option(
    metavar="START:END", help="only what starts in this window, from the run's start, e.g. 2.5s:3s or :500ms",
    show_default="all")]
RanksOpt = Annotated[str | None, typer.Option(
    metavar="LIST", help="only the calls of these ranks (and the server events serving them), e.g. 0-15,64",
    show_default="all")]
FilesOpt = Annotated[list[str] | None, typer.Option(
    "--files", metavar="PATTERN", help="only the calls on files whose name matches (fnmatch, e.g. "
    "'*.h5'; repeatable), and the server events serving them", show_default="all")]
ServersOpt = Annotated[str | None, typer.Option(
    metavar="LIST", help="only the events of these servers, e.g. io0,io1", show_default="all")]


def _selection(window: str | None, ranks: str | None, files: list[str] | None, servers: str | None):
    """The selection of the view and export options (an option given empty is refused: it would select
    everything, which leaving it out says)."""
    from callid import api

    given = [("--window", window), ("--ranks", ranks), ("--servers", servers),
             *(("--files", f) for f in files or ())]
    for option, value in given:
        if value is not None and not value.strip(" :,"):
            raise BadValue(f"{option}: {value!r} selects nothing in particular; leave the option out for all")
    return api.selection(window or None, ranks or None, files or (), servers or ())


@app.command(cls=_Command)
def view(
    db: DbPath,
    output: Annotated[Path, typer.Option(
        "-o", "--output", metavar="FILE", help="HTML page to write")] = Path("timeline.html"),
    window: WindowOpt = None,
    ranks: RanksOpt = None,
    files: FilesOpt = None,
    servers: ServersOpt = None,
    detail: Annotated[int, typer.Option(
        min=0, metavar="N", help="at most this many events in full detail (calls, server operations, "
        "arrows); the rest is summarised in time bins per lane; narrow the selection to see it all")
    ] = 200_000,  # (pipeline.timeline.DETAIL; checked by a test)
    force: Force = False,
    as_json: JsonFlag = False,
) -> None:
    """Write one self-contained HTML timeline: lanes per rank and server, arrows per disk operation.

    The page stays small whatever the trace: the selected events in full detail up to
    --detail, a summary (time bins per lane: counts, bytes, dominant operation; arrows per
    bin pair) for the rest; the page says what it summarises.  Zoom with the wheel, pan by
    dragging, hover for details, search a CallID, collapse or hide lanes; arrows go from the
    call's start (or the aggregator's request) to the disk operation.

    Example: callid view merged.duckdb --window 2.5s:3s --ranks 0-15 -o timeline.html
    """
    from callid import api

    sel = _selection(window, ranks, files, servers)
    guard_output(output, outputs.PAGE, [db], force)
    with _steps("view", quiet=as_json) as on_step:
        summary = api.view(db, output, sel, detail, on_step)
    if as_json:
        _echo_json(summary)
    else:
        typer.echo(f"callid: wrote {output} ({summary['detail_events']} events in detail, "
                   f"{summary['summarised_events']} summarised, {summary['bytes'] / 1024:.0f} KiB); "
                   "open it in a browser")


@app.command(cls=_Command)
def report(
    dbs: Annotated[list[Path], typer.Argument(
        metavar="DB...", help="merged output(s) of 'callid merge'; two are compared side by side",
        show_default=False)],
    output: Annotated[Path, typer.Option(
        "-o", "--output", metavar="FILE", help="HTML page to write")] = Path("report.html"),
    force: Force = False,
    as_json: JsonFlag = False,
) -> None:
    """Write the one page to read first: the run, its time and bytes, and what to change.

    One self-contained HTML page (no network needed): the run (ranks, servers, layout,
    duration, bytes, bandwidth), time per function and per rank, the slowest calls with
    their latency breakdown, access-size histograms, rank x time and server x time
    heatmaps, per-file and per-server tables, fan-out and fan-in distributions, the
    insights (callid insights), the usage findings (callid check) and the clock alignment.
    With two databases (e.g. before and after changing a hint) the page puts them side by
    side, with the insights that appeared or disappeared.

    Example: callid report merged.duckdb -o report.html
    """
    from callid import api

    if len(dbs) > 2:
        raise BadValue("give one merged database, or two to compare")
    guard_output(output, outputs.PAGE, dbs, force)
    with _steps("report", quiet=as_json) as on_step:
        summary = api.report(list(dbs), output, on_step)
    if as_json:
        _echo_json(summary)
    else:
        typer.echo(f"callid: wrote {output} ({summary.get('bytes', 0) / 1024:.0f} KiB); open it in a browser")


@app.command(cls=_Command)
def export(
    db: DbPath,
    output: Annotated[Path | None, typer.Option(
        "-o", "--output", metavar="PATH", help="trace file (chrome, perfetto) or archive directory (otf2) to "
        "write", show_default="trace.json, trace.pftrace or trace_otf2, by --format")] = None,
    fmt: Annotated[TraceFormat, typer.Option(
        "--format", help="chrome: trace-event JSON (Perfetto, chrome://tracing); perfetto: Perfetto's native "
        "protobuf trace (TrackEvent with flows; loads faster); otf2: an OTF2 archive with I/O records "
        "(Vampir, Scalasca)")] = TraceFormat.CHROME,
    window: WindowOpt = None,
    ranks: RanksOpt = None,
    files: FilesOpt = None,
    servers: ServersOpt = None,
    force: Force = False,
    as_json: JsonFlag = False,
) -> None:
    """Export the merged trace with its call -> disk-operation arrows for other viewers.

    Ranks and servers are tracks, every event carries its CallID, arrows are flows (chrome,
    perfetto) or the calls' I/O records matched to the disk operations (otf2).  The same
    selection options as callid view; the trace is written as a stream.

    Example: callid export merged.duckdb --format perfetto -o trace.pftrace
    """
    from callid import api

    sel = _selection(window, ranks, files, servers)
    default = {"chrome": "trace.json", "perfetto": "trace.pftrace", "otf2": "trace_otf2"}[fmt.value]
    output = output or Path(default)
    kind = {TraceFormat.CHROME: outputs.CHROME, TraceFormat.PERFETTO: outputs.PERFETTO}.get(fmt, outputs.OTF2)
    guard_output(output, kind, [db], force)
    with _bar(f"export {fmt.value}", quiet=as_json) as on_progress:
        summary = api.export(db, output, fmt.value, sel, on_progress)
    if as_json:
        _echo_json(summary)
        return
    typer.echo(f"callid: wrote {output} ({summary['events']} events, {summary['arrows']} arrows); open "
               + (f"{summary['anchor']} in Vampir" if fmt == TraceFormat.OTF2 else "it in https://ui.perfetto.dev"))
    if summary.get("arrows_backwards"):
        typer.echo(f"callid: {summary['arrows_backwards']} arrows end before their call starts (clocks off): "
                   "viewers drop them; callid stats shows the clock alignment", err=True)


@app.command(cls=_Command)
def synth(
    out_dir: Annotated[Path, typer.Option(
        "-d", "--out-dir", parser=_out_dir, metavar="DIR",
        help="directory to write the logs and the truth into")
    ] = Path("synth-out"),
    ranks: Annotated[int, typer.Option(min=1, metavar="N", help="ranks")] = SYNTH.ranks,
    servers: Annotated[int, typer.Option(min=1, metavar="N", help="I/O servers")] = SYNTH.servers,
    calls: Annotated[int, typer.Option(min=1, metavar="N", help="calls in all")] = SYNTH.calls,
    fanout: Annotated[int, typer.Option(min=1, metavar="N", help="disk operations per call")] = SYNTH.fanout,
    collective_share: Annotated[float, typer.Option(
        min=0, max=1, metavar="SHARE", help="share of collective calls (0..1)")] = SYNTH.collective_share,
    skew: Annotated[str, typer.Option(
        metavar="SPEC", help="clock offsets, drifts and drift wander, e.g. "
        "server:0=+250ms@15ppm~1ppm,host:1=-3ms@-12ppm (as callid run --clock-skew)")] = SYNTH.skew,
    duration: Annotated[float, typer.Option(
        parser=_duration, metavar="DURATION", help="time from the first call to the last, e.g. 1h",
        show_default="calls back to back")] = "0",
    async_share: Annotated[float, typer.Option(
        min=0, max=1, metavar="SHARE", help="share of writes whose disk operations end after the call "
        "(write-back, 0..1)")] = SYNTH.async_share,
    misjoined: Annotated[int, typer.Option(
        min=0, metavar="N", help="requests logged with another call's CallID")] = SYNTH.misjoined,
    ranks_per_host: Annotated[int, typer.Option(
        min=0, metavar="N", help="ranks per simulated host (0: all on one host)")] = SYNTH.ranks_per_host,
    seed: Annotated[int, typer.Option(min=0, metavar="N", help="random seed")] = SYNTH.seed,
    force: Force = False,
    as_json: JsonFlag = False,
) -> None:
    """Write synthetic client and server logs with their true arrows and clocks (for tests and benchmarks).

    DIR/client.parquet and DIR/server.parquet have the schemas of a real run;
    DIR/truth.parquet lists the exact arrows (callid, server, event_id); the true
    clock parameters are in the files' metadata, as a real run stores them.

    Example: callid synth --ranks 16 --calls 1000000 --duration 1h --skew server:0=+250ms@15ppm -d big
    """
    from callid_core.clock import SkewError
    from pipeline.synth import synthesize

    opts = SynthOptions(ranks=ranks, servers=servers, calls=calls, fanout=fanout,
                        collective_share=collective_share, skew=skew, duration=duration,
                        async_share=async_share, misjoined=misjoined, ranks_per_host=ranks_per_host,
                        seed=seed)
    _guard_dir(out_dir, ("client.parquet", "server.parquet", "truth.parquet"), [], force)
    try:
        with _steps("synth", quiet=as_json) as step:
            counts = synthesize(opts, out_dir, on_chunk=lambda done, total: step(f"{done * 100 // total}%"))
    except SkewError as exc:
        raise BadValue(f"--skew: {exc}") from None
    if as_json:
        _echo_json({"out_dir": str(out_dir), **counts})
        return
    typer.echo(f"callid: wrote {out_dir}/client.parquet, server.parquet and truth.parquet ({counts['calls']} "
               f"calls, {counts['rpcs']} requests, {counts['server_ops']} server events, "
               f"{counts['arrows']} arrows)")


@app.command(cls=_Command)
def demo(
    out_dir: Annotated[Path, typer.Option(
        "-d", "--out-dir", parser=_out_dir, metavar="DIR",
        help="directory for the logs and the merged database")
    ] = Path("callid-out"),
    np: Ranks = defaults.DEFAULT_RANKS,
    servers: Servers = defaults.DEFAULT_IO_SERVERS,
    force: Force = False,
    as_json: Annotated[bool, typer.Option("--json", help="print the statistics as JSON")] = False,
) -> None:
    """Run the thesis demo traced, merge the logs and print the statistics.

    Each rank writes 1 MiB to its segment of /pvfs2/demo, all synchronise, and each
    reads back the next rank's segment and checks it (the demo program of the 2006
    thesis that started callid: "Tracing the Connections Between MPI-IO Calls and
    their Corresponding PVFS2 Disk Operations").
    """
    from callid import api
    from callid.run import RunOptions
    from pipeline.stats import render_stats

    script = Path(__file__).resolve().parents[1] / "examples" / "callid_demo.py"
    if not script.is_file():
        raise Failed(f"{script}: demo script not found (install from a checkout: pip install -e .)")
    _guard_dir(out_dir, (*RUN_OUTPUTS, "merged.duckdb"), [], force)
    result = _run_traced(RunOptions(target=[str(script)], np=np, servers=servers, out=str(out_dir),
                                    quiet=as_json))
    db = out_dir / "merged.duckdb"
    try:
        api.merge(result.client, result.server, db)
        figures = api.stats(db)
    except InputError as exc:  # (the logs of our own run: a failure, not bad input)
        raise Failed(str(exc)) from None
    if as_json:
        _echo_json(figures)
        return
    typer.echo(render_stats(figures))
    typer.echo(f"\nmerged database: {db}   (try: callid insights {db}; callid report {db} -o report.html; "
               f"callid sql {db} \"SELECT * FROM fanout\")", err=True)


def commands() -> dict[str, Any]:
    """Every command (typer's, with click's ``Command`` API) by its name after ``callid`` (a group's as
    ``GROUP COMMAND``), in order.  A group is what holds ``commands`` (typer's ``TyperGroup`` is no
    click ``Group``: it builds on its own copy of click)."""
    def walk(prefix: str, group: Any) -> Iterator[tuple[str, Any]]:
        for name, command in group.commands.items():
            if isinstance(getattr(command, "commands", None), Mapping):
                yield from walk(f"{prefix}{name} ", command)
            else:
                yield prefix + name, command
    return dict(walk("", typer.main.get_command(app)))


def main() -> None:
    """Entry point of the ``callid`` console script: every error is one line with its exit status;
    Ctrl-C (SIGINT) is "callid: interrupted", exit status 130, with no partial output left."""
    previous = signal.signal(signal.SIGINT, on_interrupt)
    try:
        app()
    except SystemExit:
        if INTERRUPTED.is_set():  # (swallowed on the way, e.g. by DuckDB: the command still stops here)
            _interrupted()
        raise
    except (KeyboardInterrupt, Interrupt):
        _interrupted()
    except Exception as exc:
        if INTERRUPTED.is_set():  # (what the interrupt became on its way, e.g. DuckDB's "Query interrupted")
            _interrupted()
        _fail(exc)
    finally:
        if signal.getsignal(signal.SIGINT) is on_interrupt:
            signal.signal(signal.SIGINT, previous)


def _fail(exc: Exception) -> None:
    """Say ``exc`` in one line and exit with its status; an exception nobody expected goes on up."""
    if isinstance(exc, CallidError):
        if exc.exit_code > 128:  # (stopped by a signal: one more, while this process ends, changes nothing)
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                signal.signal(sig, signal.SIG_IGN)
        typer.echo(f"callid: error: {exc}", err=True)
        sys.exit(exc.exit_code)
    if isinstance(exc, OSError):  # an output that cannot be written, a file that cannot be read
        where = f"{exc.filename}: " if exc.filename else ""
        typer.echo(f"callid: error: {where}{os_reason(exc)}", err=True)
        sys.exit(EXIT_FAILED)
    # a database or file damaged beyond what the checks on opening see
    if type(exc).__name__ != "IOException" or not type(exc).__module__.endswith("duckdb"):
        raise exc
    typer.echo(f"callid: error: damaged input ({str(exc).splitlines()[0]})", err=True)
    sys.exit(EXIT_USAGE)


def _interrupted() -> None:
    typer.echo("callid: interrupted", err=True)
    sys.exit(130)


if __name__ == "__main__":
    main()
