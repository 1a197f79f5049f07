"""The rule catalogues of ``callid check`` and ``callid insights``: SQL files loaded, selected, gated,
run and listed one way.

A rule is one file ``pipeline/<directory>/CODE_name.sql``: a leading comment of ``-- key: value``
lines (the header: ``title``, ``columns`` (the columns it decides from), the catalogue's own keys, and
``needs``: what it needs of the run, names of :data:`NEEDS`, optional unless the catalogue requires it),
then one query returning one finding per row.  ``_views.sql`` beside them defines the temporary views
several rules share.  A rule whose needs the run does not meet (a replay records no closes; a replay
that did not keep the ranks' pace has no rank times) is not run, and :meth:`Gate.reason` says why;
each catalogue says it its way (checks: "not decidable from this source"; insights: an 'info' finding).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import TypeVar

import duckdb

from callid_core.errors import BadValue, InputError
from callid_core.evidence import EVIDENCE, Source, source_of_origins
from pipeline.lag import ReplayLag, replay_lag
from pipeline.merged import Handle, Merged

__all__ = ["NEEDS", "Catalogue", "Gate", "Rule", "analysing", "gate", "header_fields", "leading_comment"]

#: what a rule may need of a run (its ``needs`` header): the evidence its source records, and pace
NEEDS: dict[str, str] = {
    **EVIDENCE, "pace": "each rank's time: on a replay, one that kept the ranks' pace (pipeline.lag)"}
#: the header keys every rule has
COMMON_KEYS = ("title", "columns")
#: DuckDB's memory for a rule's query, and for every query of a command that runs both catalogues
#: (:func:`analysing`: two queries at once share it): beyond it, it spills to disk (the race check at
#: the scale check, 1 M accesses, held 1.6 GB, 20 % slower under this limit); a query that cannot run
#: within it runs again with DuckDB's own limit
MEMORY_LIMIT = "1.5GB"

T = TypeVar("T")


def analysing(m: Handle, begin: Callable[[], None], compute: Callable[[], T]) -> T:
    """A command's analyses on ``m``: ``begin()`` (what it begins beside the rest,
    :meth:`~pipeline.merged.Handle.start`), then ``compute()``, every query of the database (those beside
    it too) under :data:`MEMORY_LIMIT`, the database's; if one cannot run within it, ``compute()`` again
    under DuckDB's own (what was computed is not computed again)."""
    try:
        with m.settings(memory_limit=MEMORY_LIMIT):
            begin()
            return compute()
    except duckdb.OutOfMemoryException:
        m.wait_started()  # (until then, a rule beside holds the limit)
        return compute()


def leading_comment(sql: str) -> list[str]:
    """The lines of a SQL text's leading ``--`` comment, without the dashes."""
    return [ln[2:].strip() for ln in itertools.takewhile(lambda ln: ln.startswith("--"), sql.splitlines())]


def header_fields(sql: str) -> dict[str, str]:
    """The ``-- key: value`` lines of a SQL text's leading comment (a rule's header)."""
    return {k.strip(): v.strip() for k, v in (ln.split(":", 1) for ln in leading_comment(sql) if ":" in ln)}


@dataclass(frozen=True)
class Rule:
    """One rule: its code, its header's fields and its query."""

    code: str
    header: dict[str, str] = field(hash=False)
    sql: str

    @property
    def title(self) -> str:
        return self.header["title"]

    @property
    def columns(self) -> str:
        return self.header["columns"]

    @property
    def needs(self) -> tuple[str, ...]:
        """What it needs of a run (names of :data:`NEEDS`), in the header's order."""
        return tuple(n.strip() for n in self.header.get("needs", "").split(",") if n.strip())

    def __getattr__(self, key: str) -> str:  # (the catalogue's own header keys: rule.severity, ...)
        try:
            return self.header[key]
        except KeyError:
            raise AttributeError(key) from None


@dataclass(frozen=True)
class Catalogue:
    """One kind of rule: where its files are, its codes, its header's keys and their allowed values,
    and how ``--list`` shows each rule."""

    what: str  # 'check', 'insight'
    directory: str  # under pipeline/
    code: re.Pattern
    keys: tuple[str, ...]  # the header keys besides COMMON_KEYS
    choices: tuple[tuple[str, tuple[str, ...]], ...]  # (key, its allowed values)
    list_line: str  # one line of --list: a format of the rule's code and header keys
    list_row: Callable[[Rule], dict]  # one row of --list --json
    validate: Callable[[Rule], str | None] = lambda rule: None  # what else is wrong with a rule's header

    def rules(self) -> list[Rule]:
        """Every rule, by code."""
        return _load(self)

    def select(self, codes: list[str] | None) -> list[Rule]:
        """The rules whose code is in ``codes`` (all if none given); :class:`BadValue` naming the codes
        there are if one is unknown."""
        rules = self.rules()
        if not codes:
            return rules
        known = {r.code for r in rules}
        unknown = [c for c in codes if c not in known]
        if unknown:
            raise BadValue(f"no {self.what} {', '.join(unknown)} ({self.what}s: {', '.join(sorted(known))})")
        return [r for r in rules if r.code in codes]

    def run(self, m: Handle, rules: list[Rule], wrap: Callable[[str], str] = lambda sql: sql,
            ) -> Iterator[tuple[Rule, list[str], list[tuple]]]:
        """Each rule's column names and rows on ``m`` (after the catalogue's shared views); ``wrap``: the
        query run of a rule's query (e.g. a selection of its rows and columns)."""
        m.once((self.directory, "views"), lambda: m.con.execute(self._file("_views.sql").read_text()))
        def rows_of(sql: str) -> tuple[list[str], list[tuple]]:
            cur = m.con.execute(sql)
            return [d[0] for d in cur.description], cur.fetchall()

        own_limit = m.setting_before("memory_limit")
        with m.settings(memory_limit=MEMORY_LIMIT):  # (once for all: setting it after a query costs 5 ms)
            for rule in rules:
                try:
                    try:
                        names, rows = rows_of(wrap(rule.sql))
                    except duckdb.OutOfMemoryException:
                        with m.settings(memory_limit=own_limit):
                            names, rows = rows_of(wrap(rule.sql))
                except duckdb.Error as exc:
                    why = str(exc).splitlines()[0]
                    raise InputError(f"{m.path}: {self.what} {rule.code} cannot run ({why})") from None
                yield rule, names, rows

    def listing(self) -> tuple[list[dict], str]:
        """``--list``: a row per rule (``--json``) and the lines for people."""
        rules = self.rules()
        return [self.list_row(r) for r in rules], "\n".join(self.list_line.format(code=r.code, **r.header)
                                                            for r in rules)

    def _file(self, name: str):
        return resources.files("pipeline").joinpath(self.directory, name)


@cache
def _load(catalogue: Catalogue) -> list[Rule]:
    out = []
    for entry in sorted(resources.files("pipeline").joinpath(catalogue.directory).iterdir(),
                        key=lambda e: e.name):
        if entry.name.endswith(".sql") and not entry.name.startswith("_"):
            out.append(_parse(catalogue, entry.name, entry.read_text()))
    return out


def _parse(catalogue: Catalogue, name: str, text: str) -> Rule:
    """The rule of file ``name``; ValueError (a bug of the shipped files) saying what its header lacks."""
    rule = Rule(name.split("_", 1)[0], header_fields(text), text)
    keys = (*COMMON_KEYS, *catalogue.keys)
    where = f"{catalogue.directory}/{name}"
    wrong = [k for k in keys if not rule.header.get(k)] or \
        [k for k, allowed in catalogue.choices if rule.header[k] not in allowed]
    if not catalogue.code.match(rule.code) or wrong:
        allowed = "; ".join(f"{k} one of {', '.join(v)}" for k, v in catalogue.choices)
        raise ValueError(f"{where}: a header with {', '.join(keys)} ({allowed}) and a name CODE_*.sql are "
                         f"needed")
    unknown = [n for n in rule.needs if n not in NEEDS]
    if unknown:
        raise ValueError(f"{where}: needs {', '.join(unknown)}: not something a run can have "
                         f"({', '.join(NEEDS)})")
    if problem := catalogue.validate(rule):
        raise ValueError(f"{where}: {problem}")
    return rule


@dataclass(frozen=True)
class Gate:
    """What a merged output can decide: what its source records, and whether a replay kept the pace."""

    source: Source
    lag: ReplayLag | None

    def missing(self, needs: tuple[str, ...]) -> list[str]:
        """What of ``needs`` the run does not have, in their order."""
        pace = self.lag is None or self.lag.faithful
        return [n for n in needs if not (pace if n == "pace" else n in self.source.records)]

    def reason(self, missing: list[str]) -> str:
        """Why a rule that needs what is ``missing`` is not run."""
        if "pace" in missing and self.lag is not None:
            return self.lag.why_not() or ""
        return f"not recorded in {self.source.label}: {', '.join(missing)}"


def gate(m: Merged) -> Gate:
    """The :class:`Gate` of ``m`` (the source by the origins of its calls: a traced run records
    everything its tracers' switches left on, a replay what its source logged)."""
    def make() -> Gate:
        source = source_of_origins([o for (o,) in m.rows("SELECT DISTINCT origin FROM calls")])
        config = m.rows("SELECT value FROM run WHERE key = 'client.config'")
        return Gate(source.switched(json.loads(config[0][0]) if config and config[0][0] else {}),
                    replay_lag(m.con))
    return m.once("gate", make)
