"""The command-line battery: what a careless user and an attacker type, and what must happen.

Each case runs the ``callid`` command once, in a fresh copy of a workspace holding a real traced
run, its merged outputs and a few damaged or foreign files, and is judged on: a Python traceback,
a hang, processes left behind, an input or foreign file changed (overwritten), and a bad value
silently accepted (exit 0).  ``tests/cli/test_battery.py`` runs every case;
``python -m tests.cli.battery [--checkout DIR]`` prints the table for a checkout (e.g. an older one).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from tests.tracked import Tracked

ROOT = Path(__file__).resolve().parents[2]
HANG = 45.0  # seconds after which a case counts as hung

#: a program that writes, then fails as its first argument says (on rank 1)
PROGRAM = """\
import os, signal, sys, time
from mpi4py import MPI
comm = MPI.COMM_WORLD
f = MPI.File.Open(comm, "/pvfs2/battery", MPI.MODE_CREATE | MPI.MODE_RDWR)
for i in range(20):
    f.Write_at((comm.rank * 20 + i) * 4096, bytearray(4096))
mode = sys.argv[1] if len(sys.argv) > 1 else "ok"
if comm.rank == 1 and mode == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if comm.rank == 1 and mode == "raise":
    raise RuntimeError("boom")
comm.Barrier()
f.Close()
"""


@dataclass
class Case:
    """One command line; ``ok``: it must succeed (else it must fail, exit != 0, in one line)."""

    id: str
    args: list[str]
    ok: bool = False
    program_fails: bool = False  # the traced program raises: its own traceback is expected
    replaces: tuple[str, ...] = ()  # watched files the case rewrites as its own outputs


LOGS = ["run/client.parquet", "run/server.parquet"]
#: files of the workspace that every case must leave unchanged
INPUTS = [*LOGS, "m.duckdb", "m.duckdb.data/calls.parquet", "mp/calls.parquet", "important.txt", "fs.json",
          "fs.secret", "run/parts/user.txt", "prog.py"]

CASES = [
    # run: values that cannot work
    *(Case(f"run {' '.join(a)}", ["run", *a, "-d", "r2", "prog.py"]) for a in [
        ["--strip-size", "0"], ["--flow-buffer", "0"], ["--flow-buffer", "3"], ["--flow-buffer", "64GiB"],
        ["-n", "99999999999999999999"], ["-n", "0"], ["-n", "-3"], ["--servers", "100000"],
        ["--servers", "0"],
        ["--mount", ""], ["--mount", "relative"], ["--clock-skew", "server:0=+100000s"],
        ["--clock-skew", "server:0=+1ms@5000000ppm"], ["--clock-skew", "server:7=+1ms"],
        ["--clock-skew", "garbage"], ["-n", "4", "--callid-layout", "32/1"], ["--callid-layout", "64/99"],
        ["--callid-layout", "x"], ["--timeout", "-1"], ["--small-io", "1MiB"], ["--strip-size", "lots"],
        ["--ranks-per-host", "-1"], ["--strip-size", "1GiB", "--flow-buffer", "4KiB"],
        ["--strip-size", "64kb"], ["--timeout", "inf"], ["--timeout", "1e308"], ["--timeout", "nan"],
        ["--ranks-per-host", "99999999999999999999"]]),
    Case("run -d ''", ["run", "-d", "", "prog.py"]),
    Case("synth -d ''", ["synth", "--calls", "10", "-d", ""]),
    Case("run no script", ["run"]),
    Case("run missing script", ["run", "nosuch.py"]),
    Case("run unknown option", ["run", "--bogus", "prog.py"]),
    Case("run -d a file", ["run", "-d", "important.txt", "prog.py"]),
    Case("run over a foreign client.parquet", ["run", "-d", "foreign", "prog.py"]),
    Case("run -d run keeps a user's file in parts", ["run", "-n", "2", "-d", "run", "prog.py"], ok=True,
         replaces=tuple(LOGS)),
    Case("run on storage of more servers", ["run", "-n", "2", "--servers", "1", "-d", "run", "prog.py"]),
    Case("run rank killed", ["run", "-n", "2", "-d", "r3", "prog.py", "kill"]),
    Case("run rank raises", ["run", "-n", "2", "-d", "r4", "prog.py", "raise"], program_fails=True),
    Case("run ok", ["run", "-n", "2", "-d", "r5", "prog.py"], ok=True),
    # merge: bad logs, outputs over inputs
    Case("merge -o a foreign file", ["merge", *LOGS, "-o", "important.txt"]),
    Case("merge -o its input", ["merge", *LOGS, "-o", "run/client.parquet"]),
    Case("merge -o the run dir (parquet)", ["merge", *LOGS, "--storage",
                                            "parquet", "-o", "run"]),
    Case("merge over its own output", ["merge", *LOGS, "-o", "m2.duckdb"],
         ok=True),
    Case("merge swapped logs", ["merge", "run/server.parquet", "run/client.parquet", "-o", "x.duckdb"]),
    Case("merge missing log", ["merge", "nosuch.parquet", "run/server.parquet", "-o", "x.duckdb"]),
    Case("merge junk log", ["merge", "important.txt", "run/server.parquet", "-o", "x.duckdb"]),
    *(Case(f"merge {what}", ["merge", f"bad/{name}.parquet", "run/server.parquet", "-o", "x.duckdb"])
      for what, name in [("NULL t_start", "null_t_start"), ("NULL callid", "null_callid"),
                         ("negative size", "negative_size"), ("t_end < t_start", "backwards"),
                         ("duplicate rows", "duplicates"), ("a bit flipped near its end", "flipped")]),
    Case("merge NULL server", ["merge", "run/client.parquet", "bad/null_server.parquet", "-o", "x.duckdb"]),
    Case("merge --memory-limit -1GB", ["merge", *LOGS, "--memory-limit", "-1GB", "-o", "neg.duckdb"]),
    Case("merge --memory-limit 99999TB", ["merge", *LOGS, "--memory-limit", "99999TB", "-o", "big.duckdb"]),
    Case("merge --memory-limit junk", ["merge", *LOGS, "--memory-limit",
                                       "lots", "-o", "x.duckdb"]),
    # outputs that would destroy inputs
    Case("view -o the database", ["view", "m.duckdb", "-o", "m.duckdb"]),
    Case("view -o a foreign file", ["view", "m.duckdb", "-o", "important.txt"]),
    Case("view -o a log", ["view", "m.duckdb", "-o", "run/client.parquet"]),
    Case("report -o the database", ["report", "m.duckdb", "-o", "m.duckdb"]),
    Case("report -o a foreign file", ["report", "m.duckdb", "-o", "important.txt"]),
    Case("export -o a log", ["export", "m.duckdb", "-o", "run/client.parquet"]),
    Case("export -o the database", ["export", "m.duckdb", "-o", "m.duckdb"]),
    Case("export otf2 -o the parquet output", ["export", "mp", "--format", "otf2", "-o", "mp"]),
    Case("export perfetto -o a foreign file", ["export", "m.duckdb", "--format", "perfetto", "-o",
                                               "important.txt"]),
    Case("synth -d over a run's logs' dir file", ["synth", "--calls", "10", "-d", "important.txt"]),
    Case("run -d beside a file system's configuration", ["run", "-n", "1", "-d", ".", "prog.py"]),
    Case("synth negative seed", ["synth", "--seed", "-1", "-d", "synth-out"]),
    Case("synth more ranks than calls", ["synth", "--ranks", "10000000", "--calls", "10", "-d", "synth-out"]),
    Case("synth more ranks than CallIDs hold", ["synth", "--ranks", "99999999999", "--calls", "99999999999",
                                                "-d", "synth-out"]),
    Case("view with --force over a foreign file", ["view", "m.duckdb", "-o", "scratch.txt", "--force"],
         ok=True),
    # sql: read-only, nothing outside the database
    *(Case(f"sql {q}", ["sql", "m.duckdb", q]) for q in [
        "COPY (SELECT 1) TO 'important.txt'", "COPY calls TO 'm.duckdb'", "ATTACH 'new.duckdb' AS n",
        "SELECT * FROM read_text('/etc/passwd')", "SELECT * FROM read_csv('/etc/passwd')",
        "INSTALL httpfs", "LOAD httpfs", "SET enable_external_access = true", "DROP TABLE _calls",
        "SELECT * FROM nosuch", "SELEC 1", "PRAGMA threads = 1"]),
    Case("sql parquet COPY into the output", ["sql", "mp", "COPY calls TO 'mp/x.csv'"]),
    Case("sql COPY over the output's own table", ["sql", "m.duckdb", "COPY (SELECT 1 AS x) TO "
                                                  "'m.duckdb.data/calls.parquet' (FORMAT parquet, "
                                                  "USE_TMP_FILE false)"]),
    Case("sql parquet COPY over its own table", ["sql", "mp", "COPY (SELECT 1 AS x) TO 'mp/calls.parquet' "
                                                 "(FORMAT parquet, USE_TMP_FILE false)"]),
    Case("sql EXPORT DATABASE", ["sql", "m.duckdb", "EXPORT DATABASE 'exported'"]),
    Case("sql --timeout beyond 30 days", ["sql", "m.duckdb", "--timeout", "99999999999999999999h",
                                          "SELECT 1"]),
    Case("sql a query without end", ["sql", "m.duckdb", "--timeout", "2s", "WITH RECURSIVE t(n) AS (SELECT 1 "
                                     "UNION ALL SELECT n + 1 FROM t) SELECT count(*) FROM t"]),
    Case("sql -f a FIFO with no writer", ["sql", "m.duckdb", "-f", "fifo"]),
    Case("view --window ':'", ["view", "m.duckdb", "--window", ":", "-o", "w.html"]),
    Case("view --servers ''", ["view", "m.duckdb", "--servers", "", "-o", "s.html"]),
    Case("sql -f a binary file", ["sql", "m.duckdb", "-f", "m.duckdb"]),
    Case("sql -f /dev/zero", ["sql", "m.duckdb", "-f", "/dev/zero"]),
    # --force replaces files, never an input by another path, a merged output's data or a FIFO
    Case("merge over a link of its client log", ["merge", *LOGS, "-o", "client-link.parquet", "--force"]),
    Case("view into a merged output's data", ["view", "m.duckdb", "-o", "m.duckdb.data/calls.parquet",
                                              "--force"]),
    Case("view into a parquet merged output", ["view", "m.duckdb", "-o", "mp/calls.parquet", "--force"]),
    Case("report over a FIFO", ["report", "m.duckdb", "-o", "fifo", "--force"]),
    Case("sql select", ["sql", "m.duckdb", "SELECT count(*) FROM arrows"], ok=True),
    Case("sql no database", ["sql", "nosuch.duckdb", "SELECT 1"]),
    # commands on what is not a complete merge output
    *(Case(f"{cmd} {what}", [cmd, what, *extra]) for cmd, extra in [
        ("stats", []), ("view", ["-o", "v.html"]), ("export", ["-o", "t.json"]), ("sql", ["SELECT 1"]),
        ("insights", []), ("check", []), ("report", ["-o", "r.html"])]
      for what in ["wrong_columns.duckdb", "truncated.duckdb", "junkdir", "important.txt",
                   "run/client.parquet", "nosuch.duckdb"]),
    # a database whose views read other files
    *(Case(f"{cmd} a database whose views read other files", [cmd, "hostile.duckdb", *extra])
      for cmd, extra in [("stats", []), ("view", ["-o", "v.html"]), ("export", ["-o", "t.json"]),
                         ("insights", []), ("check", []), ("report", ["-o", "r.html"])]),
    # selections and names
    Case("view window backwards", ["view", "m.duckdb", "--window", "2s:1s", "-o", "v.html"]),
    Case("view unknown server", ["view", "m.duckdb", "--servers", "io99", "-o", "v.html"]),
    Case("view ranks junk", ["view", "m.duckdb", "--ranks", "a-b", "-o", "v.html"]),
    Case("view nothing selected", ["view", "m.duckdb", "--ranks", "99", "-o", "v.html"]),
    Case("view a run with <!-- in a file name", ["view", "weird.duckdb", "-o", "weird.html"], ok=True),
    Case("stats --json", ["stats", "m.duckdb", "--json"], ok=True),
    Case("replay -d over its source", ["replay", "run/client.parquet", "-d", "run"]),
    *(Case(f"replay {' '.join(a)}", ["replay", "run/client.parquet", *a, "-d", "rp"]) for a in [
        ["--time-scale", "0"], ["--hint", "cb_nodes=-1"], ["--hint", "cb_nodes=abc"],
        ["--hint", "cb_buffer_size=0"], ["--hint", "bogus=1"], ["--ranks", "0-99999999999"]]),
    Case("view --ranks beyond any rank", ["view", "m.duckdb", "--ranks", "0-99999999999999999999", "-o",
                                          "v.html"]),
    Case("export --ranks beyond any log", ["export", "m.duckdb", "--ranks", "0-99999999999", "-o", "t.json"]),
    Case("replay missing", ["replay", "nosuch.darshan"]),
    # a file system of servers that run elsewhere (fs.json: made, its servers never started)
    Case("fs init without --servers", ["fs", "init", "-o", "new.json"]),
    Case("fs init bad server list", ["fs", "init", "--servers", "node1:bogus", "-o", "new.json"]),
    Case("fs init over a user's file", ["fs", "init", "--servers", "127.0.0.1:io0", "-o", "important.txt"]),
    Case("fs init over a file system", ["fs", "init", "--servers", "127.0.0.1:io0", "-o", "fs.json"]),
    Case("fs init --server-dir a file", ["fs", "init", "--servers", "127.0.0.1:io0", "--server-dir",
                                         "important.txt", "-o", "new.json"]),
    Case("servers start missing config", ["servers", "start", "--config", "nosuch.json"]),
    Case("servers start a foreign config", ["servers", "start", "--config", "important.txt"]),
    Case("servers start unknown name", ["servers", "start", "--config", "fs.json", "--name", "io9"]),
    Case("servers stop none running", ["servers", "stop", "--config", "fs.json"]),
    Case("servers status none answer", ["servers", "status", "--config", "fs.json"]),
    Case("run --fs a foreign config", ["run", "--fs", "important.txt", "-d", "rf", "prog.py"]),
    Case("run --fs servers not running", ["run", "--fs", "fs.json", "-d", "rf", "prog.py"]),
]


@dataclass
class Outcome:
    case: str
    code: int | None
    traceback: bool = False
    hang: bool = False
    leftovers: list[str] = field(default_factory=list)
    overwritten: list[str] = field(default_factory=list)
    accepted: bool = False  # a bad value accepted (exit 0)
    failed: bool = False  # a case that must succeed failed
    last_line: str = ""

    @property
    def clean(self) -> bool:
        return not (self.traceback or self.hang or self.leftovers or self.overwritten or self.accepted
                    or self.failed)


def _digest(path: Path) -> str:
    if path.is_dir():
        return ",".join(f"{p.name}:{_digest(p)}" for p in sorted(path.iterdir()))
    return hashlib.sha1(path.read_bytes()).hexdigest() if path.exists() else "-"


def _callid(checkout: Path) -> list[str]:
    """The ``callid`` command of ``checkout`` (PYTHONPATH names it)."""
    return [sys.executable, "-c", "import sys; sys.argv[0] = 'callid'; from callid.cli import main; main()"]


def make_workspace(where: Path, checkout: Path = ROOT) -> Path:
    """A real traced run, its merged outputs (DuckDB and Parquet) and damaged and foreign files."""
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq

    ws = where / "ws"
    ws.mkdir()
    env = dict(os.environ, PYTHONPATH=str(checkout))
    (ws / "prog.py").write_text(PROGRAM)
    (ws / "important.txt").write_text("a user's notes\n")

    def callid(*args: str) -> None:
        subprocess.run([*_callid(checkout), *args], cwd=ws, env=env, check=True, capture_output=True,
                       timeout=300)

    callid("run", "-n", "2", "-d", "run", "prog.py")
    (ws / "run" / "parts" / "user.txt").write_text("the user's own file\n")
    callid("merge", *LOGS, "-o", "m.duckdb")
    callid("merge", *LOGS, "--storage", "parquet", "-o", "mp")
    callid("fs", "init", "--servers", "127.0.0.1:io0", "--port", "39431", "-o", "fs.json")
    (ws / "foreign").mkdir()
    pq.write_table(pa.table({"x": [1]}), ws / "foreign" / "client.parquet")
    # damaged merged outputs
    with duckdb.connect(str(ws / "wrong_columns.duckdb")) as con:
        for table in ("run", "calls", "rpcs", "server_ops", "arrows", "fanout", "clocks", "events"):
            con.execute(f"CREATE TABLE {table} (x INTEGER)")
    data = (ws / "m.duckdb").read_bytes()
    (ws / "truncated.duckdb").write_bytes(data[: len(data) // 3])
    shutil.copytree(ws / "mp", ws / "junkdir")
    (ws / "junkdir" / "calls.parquet").write_text("not parquet")
    # bad logs: one defect each, the rest as logged
    client = pq.read_table(ws / "run" / "client.parquet")
    server = pq.read_table(ws / "run" / "server.parquet")
    bad = ws / "bad"
    bad.mkdir()

    def null_first(table: pa.Table, column: str) -> pa.Table:  # (a writer that ignores the schema)
        i = table.schema.get_field_index(column)
        values = table.column(column).to_pylist()
        values[0] = None
        return table.set_column(i, table.schema.field(i).with_nullable(True),
                                pa.array(values, table.schema.field(i).type))

    def set_first(table: pa.Table, column: str, value) -> pa.Table:
        i = table.schema.get_field_index(column)
        values = table.column(column).to_pylist()
        first = next(k for k, v in enumerate(values) if v is not None)
        values[first] = value(values[first], table, first)
        return table.set_column(i, table.schema.field(i), pa.array(values, table.schema.field(i).type))

    meta = client.schema.metadata
    pq.write_table(null_first(client, "t_start").replace_schema_metadata(meta), bad / "null_t_start.parquet")
    pq.write_table(null_first(client, "callid").replace_schema_metadata(meta), bad / "null_callid.parquet")
    pq.write_table(set_first(client, "size", lambda v, t, k: -5).replace_schema_metadata(meta),
                   bad / "negative_size.parquet")
    pq.write_table(set_first(client, "t_end", lambda v, t, k: t.column("t_start")[k].as_py() - 1000)
                   .replace_schema_metadata(meta), bad / "backwards.parquet")
    pq.write_table(pa.concat_tables([client, client]).replace_schema_metadata(meta),
                   bad / "duplicates.parquet")
    pq.write_table(null_first(server, "server").replace_schema_metadata(server.schema.metadata),
                   bad / "null_server.parquet")
    data = bytearray((ws / "run" / "client.parquet").read_bytes())
    data[data.rfind(b"parquet-cpp-arrow") + 3] ^= 1  # (near its end: the footer's last string, read by none)
    (bad / "flipped.parquet").write_bytes(data)
    # a merged run whose file name holds what could end the page's script
    weird = client.set_column(client.schema.get_field_index("file"), client.schema.field("file"),
                              pa.array([f.replace("battery", "<!--</script>x") if f else f
                                        for f in client.column("file").to_pylist()], pa.string()))
    pq.write_table(weird.replace_schema_metadata(meta), bad / "weird_client.parquet")
    callid("merge", "bad/weird_client.parquet", "run/server.parquet", "-o", "weird.duckdb")
    # a merged output whose view reads a file of the user's into the function names
    callid("merge", *LOGS, "-o", "hostile.duckdb")
    with duckdb.connect(str(ws / "hostile.duckdb")) as con:
        sql = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = 'calls'").fetchall()[0][0]
        con.execute(sql.replace("CREATE VIEW calls AS", "CREATE VIEW calls_0 AS", 1))
        con.execute("CREATE OR REPLACE VIEW calls AS SELECT * REPLACE ((SELECT content FROM "
                    f"read_text('{ws / 'important.txt'}')) AS func) FROM calls_0")
    return ws


def run_case(case: Case, workspace: Path, where: Path, checkout: Path = ROOT) -> Outcome:
    """Run one case in a fresh copy of the workspace and judge it."""
    ws = where / "case"
    shutil.rmtree(ws, ignore_errors=True)
    shutil.copytree(workspace, ws, symlinks=True)
    # (what a copy does not carry: the client log by another name, a FIFO)
    os.link(ws / "run" / "client.parquet", ws / "client-link.parquet")
    os.mkfifo(ws / "fifo")
    watched = [name for name in INPUTS if name not in case.replaces]
    before = {name: _digest(ws / name) for name in watched}
    env = dict(os.environ, PYTHONPATH=str(checkout))
    out = Outcome(case.id, None)
    # (leftovers: what the case started that still runs 10 s after it ended, or runs in its directory)
    with Tracked([*_callid(checkout), *case.args], timeout=HANG, grace=10, within=ws, cwd=ws,
                 env=env) as proc:
        _, stderr = proc.communicate()
    out.hang, out.leftovers = proc.hang, proc.leftovers
    if not proc.hang:
        out.code = proc.returncode
        out.traceback = "Traceback (most recent call last)" in stderr and not case.program_fails
        out.last_line = stderr.strip().splitlines()[-1] if stderr.strip() else ""
    out.overwritten = [name for name in watched if _digest(ws / name) != before[name]]
    if out.code is not None:
        out.accepted = not case.ok and out.code == 0
        out.failed = case.ok and out.code != 0
    return out


def describe(o: Outcome) -> str:
    """What went wrong in a case, in one line."""
    return (f"exit {o.code}, traceback {o.traceback}, hang {o.hang}, leftovers {len(o.leftovers)}, "
            f"overwritten {o.overwritten}, accepted {o.accepted}, failed {o.failed}: {o.last_line[:160]}")


def table(outcomes: list[Outcome]) -> dict:
    """The battery's figures: cases, clean, tracebacks, hangs, leftovers, overwrites, silently accepted."""
    return {"cases": len(outcomes), "clean": sum(o.clean for o in outcomes),
            "tracebacks": sum(o.traceback for o in outcomes), "hangs": sum(o.hang for o in outcomes),
            "leftovers": sum(bool(o.leftovers) for o in outcomes),
            "overwrites": sum(bool(o.overwritten) for o in outcomes),
            "silently_accepted": sum(o.accepted for o in outcomes),
            "failed_good_cases": sum(o.failed for o in outcomes)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, default=ROOT, help="the callid checkout to try")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="callid-battery-") as tmp:
        workspace = make_workspace(Path(tmp), args.checkout.resolve())
        outcomes = []
        for case in CASES:
            outcome = run_case(case, workspace, Path(tmp), args.checkout.resolve())
            outcomes.append(outcome)
            if not outcome.clean:
                print(f"NOT CLEAN {case.id}: {describe(outcome)}", flush=True)
        print(json.dumps(table(outcomes)))


if __name__ == "__main__":
    main()
