"""Run claims in a shared catalog: one writer per run across collectors (issue 32).

Contract::

    table = ClaimTable(url, owner="host:/bundles", collector="host:4242:1f2e")   # CatalogUnavailable
    claims = table.claim(["run-…"], now=time.time(), lease_s=30)   # {run_id: Claim(owner, state, taken_from)}
    table.renew(now=…, lease_s=30)      # one statement: every open claim of this collector, lease pushed on
    table.open_claims()                 # the runs this collector holds open (after a renewal found fewer)
    table.owner_of("run-…")             # who holds a run (the uploader asks before it stores one)
    table.release(["run-…"], now=…)     # the run sealed here: others reject its spans as sealed
    table.close()

A claim is one row of ``run_claims``: the run, its ``owner`` (the claiming collector's catalog
origin: the bundle root the run is recorded under), the ``collector`` process that holds it, a
lease (``lease_until``, seconds since the epoch on the collectors' clocks) and a state (``open``,
``sealed``). Claiming is one ``INSERT … ON CONFLICT DO UPDATE … WHERE`` (the same SQL in SQLite
and PostgreSQL): a new run is claimed; a run of the same owner is this root's (a restarted process
takes its claims back at once); a run another owner holds is taken over only when it is ``open``
and its lease ran out (that collector is gone), and then ``taken_from`` names the old owner, whose
catalog row of the run is dropped in the same transaction: the catalog points to the new owner's
bundle. Anything else is left as it is, and the row read back says who holds it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from sqlalchemy import Column, Connection, Float, MetaData, String, Table, delete, select, text, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from .model import CatalogUnavailable
from .settings import schema_lock
from .schema import KEY_TEXT, runs
from .engine import failure_reason, make_engine
from .sql import _COUNT_SESSION, _DROP_EMPTY_SESSION, _SCHEMA_LOCK

__all__ = ["Claim", "ClaimState", "ClaimTable"]

_BATCH = 500
_CONNECT_TIMEOUT_S = 5

claims_metadata = MetaData()
run_claims = Table(
    "run_claims", claims_metadata,
    Column("run_id", KEY_TEXT, primary_key=True),
    Column("owner", KEY_TEXT, nullable=False),
    Column("collector", KEY_TEXT, nullable=False),
    Column("lease_until", Float, nullable=False),
    Column("state", String(8), nullable=False),
    Column("taken_from", KEY_TEXT),
)

_CLAIM = text(
    "INSERT INTO run_claims (run_id, owner, collector, lease_until, state, taken_from) "
    "VALUES (:run_id, :owner, :collector, :lease_until, 'open', NULL) "
    "ON CONFLICT (run_id) DO UPDATE SET collector = excluded.collector, lease_until = excluded.lease_until, "
    "taken_from = CASE WHEN run_claims.owner = excluded.owner THEN run_claims.taken_from ELSE run_claims.owner END, "
    "owner = excluded.owner "
    "WHERE run_claims.owner = excluded.owner OR (run_claims.state = 'open' AND run_claims.lease_until < :now)")


class ClaimState(str, Enum):
    OPEN = "open"
    """A collector records the run; its lease says until when it is taken for alive."""
    SEALED = "sealed"
    """The run was sealed by its owner: its spans are rejected elsewhere (a sealed bundle never changes)."""


@dataclass(frozen=True)
class Claim:
    """Who holds a run after a claim: ``owner`` (an origin), its ``state``, and the owner a takeover replaced."""

    owner: str
    collector: str
    state: ClaimState
    lease_until: float
    taken_from: str | None = None


class ClaimTable:
    """The ``run_claims`` table of one catalog database, for one collector process."""

    def __init__(self, url: str, *, owner: str, collector: str) -> None:
        self.url, self.owner, self.collector = url, owner, collector
        try:
            self._engine = self._open()
        except (SQLAlchemyError, OSError, ImportError) as exc:
            raise CatalogUnavailable(f"cannot open the run claims: {failure_reason(exc)}") from None

    def _open(self) -> Engine:
        engine = make_engine(self.url, connect_timeout_s=_CONNECT_TIMEOUT_S)
        with schema_lock(self.url), engine.begin() as connection:
            if not self.url.startswith("sqlite"):  # one opener at a time makes the table
                connection.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _SCHEMA_LOCK + 1})
            claims_metadata.create_all(connection, checkfirst=True)
        return engine

    def claim(self, run_ids: Iterable[str], *, now: float, lease_s: float) -> dict[str, Claim]:
        """Claim ``run_ids`` for this collector (those it may take) and say who holds each."""
        wanted = sorted(set(run_ids))  # one lock order for every claimer
        found: dict[str, Claim] = {}
        try:
            with self._engine.begin() as connection:
                for start in range(0, len(wanted), _BATCH):
                    chunk = wanted[start : start + _BATCH]
                    connection.execute(_CLAIM, [{"run_id": run_id, "owner": self.owner, "collector": self.collector,
                                                 "lease_until": now + lease_s, "now": now} for run_id in chunk])
                    rows = connection.execute(select(run_claims).where(run_claims.c.run_id.in_(chunk))).mappings()
                    for row in rows:
                        found[row["run_id"]] = Claim(row["owner"], row["collector"], ClaimState(row["state"]),
                                                     row["lease_until"], row["taken_from"])
                taken = [(run_id, claim.taken_from) for run_id, claim in found.items()
                         if claim.owner == self.owner and claim.taken_from not in (None, self.owner)]
                if taken and connection.dialect.has_table(connection, "runs"):
                    self._drop_rows_of_old_owners(connection, taken)
        except SQLAlchemyError as exc:
            raise CatalogUnavailable(f"the run claims failed: {failure_reason(exc)}") from None
        return found

    @staticmethod
    def _drop_rows_of_old_owners(connection: Connection, taken: list[tuple[str, str]]) -> None:
        """The catalog rows the old owners wrote of runs taken over: the new owner's row replaces them."""
        directories: set[str] = set()
        for run_id, old_owner in taken:
            condition = (runs.c.origin == old_owner, runs.c.run_id == run_id)
            directories.update(connection.execute(select(runs.c.directory).where(*condition)).scalars())
            connection.execute(delete(runs).where(*condition))
        if directories:
            parameters = [{"directory": directory} for directory in sorted(directories)]
            connection.execute(_COUNT_SESSION, parameters)
            connection.execute(_DROP_EMPTY_SESSION, parameters)

    def renew(self, *, now: float, lease_s: float) -> int:
        """Push on the lease of every open claim this collector holds; how many there were."""
        statement = (update(run_claims).where(run_claims.c.owner == self.owner, run_claims.c.collector == self.collector,
                                              run_claims.c.state == ClaimState.OPEN.value)
                     .values(lease_until=now + lease_s))
        return self._write(statement)

    def owner_of(self, run_id: str) -> str | None:
        """Who holds ``run_id`` (None: nobody claimed it)."""
        try:
            with self._engine.connect() as connection:
                return connection.execute(select(run_claims.c.owner).where(run_claims.c.run_id == run_id)).scalar()
        except SQLAlchemyError as exc:
            raise CatalogUnavailable(f"the run claims failed: {failure_reason(exc)}") from None

    def open_claims(self) -> set[str]:
        """The runs this collector holds open now."""
        try:
            with self._engine.connect() as connection:
                return set(connection.execute(select(run_claims.c.run_id).where(
                    run_claims.c.owner == self.owner, run_claims.c.collector == self.collector,
                    run_claims.c.state == ClaimState.OPEN.value)).scalars())
        except SQLAlchemyError as exc:
            raise CatalogUnavailable(f"the run claims failed: {failure_reason(exc)}") from None

    def release(self, run_ids: Iterable[str], *, now: float) -> int:
        """The runs sealed here: their claims stay, sealed (later spans of them are rejected anywhere)."""
        wanted = sorted(set(run_ids))
        released = 0
        for start in range(0, len(wanted), _BATCH):
            released += self._write(
                update(run_claims).where(run_claims.c.owner == self.owner,
                                         run_claims.c.run_id.in_(wanted[start : start + _BATCH]))
                .values(state=ClaimState.SEALED.value, lease_until=now))
        return released

    def _write(self, statement: Any) -> int:
        try:
            with self._engine.begin() as connection:
                return connection.execute(statement).rowcount or 0
        except SQLAlchemyError as exc:
            raise CatalogUnavailable(f"the run claims failed: {failure_reason(exc)}") from None

    def close(self) -> None:
        self._engine.dispose()
