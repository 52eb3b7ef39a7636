"""One writer per run across collectors: the runs this collector holds in a shared catalog.

Contract::

    claims = open_claims(root, options)       # None unless the catalog is shared (origin not "")
    sealed_elsewhere = claims.check(trace_ids)   # raises Overloaded(CLAIMED) for a run another live collector holds
    taken = claims.not_ours(trace_ids)        # at start: runs left open here that another collector took over
    set_aside(root, run_dir)                  # such a run, out of the root's runs (never resumed, listed, uploaded)
    claims.renew_if_due()                     # the sealer's tick: one statement for every open claim
    claims.release(trace_ids)                 # runs sealed here
    may_store = store_guard(root, claims)     # the uploader's question: a run another collector took is set aside
    claims.close()

Only a run's first batch at this collector asks the catalog (``catalog.claims``): the runs claimed
are kept in memory, and a batch of them costs one set lookup a trace. A collector with the
catalog in its own root (the default SQLite file) has no claims at all: nothing else records
into it. A run another collector holds is refused retryably (HTTP 503, gRPC UNAVAILABLE): the
gateway's ring moved, and the exporter's retry lands it at its owner, or here once that owner's
lease ran out (it is gone) and this collector takes the run over. A run its owner sealed is
rejected as sealed. While the catalog cannot be reached, recording goes on (one writer then
rests on the gateway's routing alone) and the catalog is asked again after ``_RETRY_S``.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from otel_session.catalog import CatalogError, catalog_disabled, catalog_origin, catalog_url
from otel_session.collector.counters import Counters, Overloaded, RetryReason
from otel_session.collector.options import CollectorOptions
from otel_session.core.journal import run_id_from_trace_id
from otel_session.core.log import get_logger, log_id

if TYPE_CHECKING:
    from otel_session.catalog.claims import ClaimTable

__all__ = ["TAKEN_OVER_DIR", "RunClaims", "collector_id", "open_claims", "set_aside", "store_guard"]

logger = get_logger(__name__)

_RETRY_S = 5.0


def collector_id() -> str:
    """This process among the collectors: ``host:pid:nonce``."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class RunClaims:
    """The claims of one collector process; ``opener`` makes its ``ClaimTable`` (again after a failure)."""

    def __init__(self, opener: Callable[[], ClaimTable], *, owner: str, lease_s: float, counters: Counters,
                 clock: Callable[[], float] = time.time) -> None:
        self.owner = owner
        self.lease_s = lease_s
        self.counters = counters
        self._opener = opener
        self._clock = clock
        self._table: ClaimTable | None = None
        self._retry_at = float("-inf")
        self._opening = threading.Lock()
        self._owned: set[int] = set()
        self._renewed_at = clock()

    @property
    def owned(self) -> frozenset[int]:
        return frozenset(self._owned)

    def check(self, trace_ids: Iterable[int]) -> frozenset[int]:
        """Claim the traces not held yet; the ones their owner sealed elsewhere are returned (to be
        rejected). Raises ``Overloaded`` (nothing taken) when another live collector holds one."""
        sealed, held = self._claim(trace_ids)
        if held:
            run_id, owner = held[0]
            logger.info("run %s is held by the collector of %s: its spans here are refused retryably", log_id(run_id), owner)
            self.counters.add(f"refused_{RetryReason.CLAIMED.value}")
            raise Overloaded(f"run {run_id} is being recorded by another collector (one writer per run); retry later",
                             RetryReason.CLAIMED)
        return sealed

    def not_ours(self, trace_ids: Iterable[int]) -> frozenset[int]:
        """Of ``trace_ids`` (runs a previous process on this root left open), those another
        collector took over or sealed meanwhile; the others are claimed."""
        sealed, held = self._claim(trace_ids)
        return sealed | {uuid.UUID(run_id.removeprefix("run-")).int for run_id, _ in held}

    def _claim(self, trace_ids: Iterable[int]) -> tuple[frozenset[int], list[tuple[str, str]]]:
        unknown = [trace_id for trace_id in trace_ids if trace_id not in self._owned]
        if not unknown:
            return frozenset(), []
        now = self._clock()
        table = self._open(now)
        if table is None:
            return frozenset(), []
        by_run = {run_id_from_trace_id(trace_id): trace_id for trace_id in unknown}
        try:
            found = table.claim(by_run, now=now, lease_s=self.lease_s)
        except CatalogError as exc:
            self._failed(exc, now)
            return frozenset(), []
        sealed: set[int] = set()
        held: list[tuple[str, str]] = []
        for run_id, trace_id in by_run.items():
            claim = found.get(run_id)
            if claim is None or claim.owner == self.owner:
                self._owned.add(trace_id)
                if claim is not None and claim.taken_from is not None and claim.taken_from != self.owner:
                    self.counters.add("runs_taken_over")
                    logger.warning("took over run %s from %s: its lease ran out (that collector is gone); the run "
                                   "goes on under this collector's root, resumed", log_id(run_id), claim.taken_from)
            elif claim.state.value == "sealed":  # ClaimState.SEALED (the SQL module is imported when used)
                sealed.add(trace_id)
            else:
                held.append((run_id, claim.owner))
        return frozenset(sealed), held

    def renew_if_due(self) -> None:
        """Push on this collector's leases once a third of the lease went by."""
        now = self._clock()
        if now - self._renewed_at < self.lease_s / 3:
            return
        table = self._open(now)
        if table is None:
            return
        try:
            renewed = table.renew(now=now, lease_s=self.lease_s)
            if renewed < len(self._owned):  # a pause past the lease: another collector took runs over
                self._forget_lost(table.open_claims())
        except CatalogError as exc:
            self._failed(exc, now)
            return
        self._renewed_at = now

    def _forget_lost(self, still_ours: set[str]) -> None:
        """Runs whose claims another collector took (this one did not renew in time): their next
        batches here ask the catalog again, and are refused while their new owner holds them."""
        lost = {trace_id for trace_id in self._owned if run_id_from_trace_id(trace_id) not in still_ours}
        if lost:
            self._owned.difference_update(lost)
            self.counters.add("claims_lost", len(lost))
            logger.warning("%d run claim(s) were taken over by another collector: this one did not renew them "
                           "within --claim-lease (%.0f s); their spans go to the new owner from now", len(lost),
                           self.lease_s)

    def holds(self, run_id: str) -> bool:
        """Whether no other collector holds ``run_id`` (True while the catalog cannot say)."""
        now = self._clock()
        table = self._open(now)
        if table is None:
            return True
        try:
            owner = table.owner_of(run_id)
        except CatalogError as exc:
            self._failed(exc, now)
            return True
        return owner is None or owner == self.owner

    def release(self, trace_ids: Iterable[int]) -> None:
        """The runs of ``trace_ids`` were sealed here."""
        released = [trace_id for trace_id in trace_ids if trace_id in self._owned]
        self._owned.difference_update(released)
        if not released:
            return
        now = self._clock()
        table = self._open(now)
        if table is None:
            return
        try:
            table.release([run_id_from_trace_id(trace_id) for trace_id in released], now=now)
        except CatalogError as exc:
            self._failed(exc, now)

    def close(self) -> None:
        if self._table is not None:
            self._table.close()
            self._table = None

    def _open(self, now: float) -> ClaimTable | None:
        with self._opening:  # intake, the sealer and the uploader ask from threads of their own
            if self._table is None and now >= self._retry_at:
                try:
                    self._table = self._opener()
                except CatalogError as exc:
                    self._failed(exc, now)
            return self._table

    def _failed(self, exc: Exception, now: float) -> None:
        if now >= self._retry_at:  # once per retry period
            logger.warning("run claims: %s; recording goes on (one writer per run rests on the gateway's routing) "
                           "and the catalog is asked again in %.0f s", exc, _RETRY_S)
        self._retry_at = now + _RETRY_S


def open_claims(root: Path, options: CollectorOptions, counters: Counters, *,
                clock: Callable[[], float] = time.time) -> RunClaims | None:
    """The claims of a collector on ``root`` whose catalog is shared; None with the root's own
    SQLite file or no catalog (then nothing else records into this catalog)."""
    if catalog_disabled():
        return None
    owner = catalog_origin(root)
    if not owner:
        return None
    url, me = catalog_url(root), collector_id()

    def opener() -> ClaimTable:
        from otel_session.catalog.claims import ClaimTable

        return ClaimTable(url, owner=owner, collector=me)

    return RunClaims(opener, owner=owner, lease_s=options.claim_lease_s, counters=counters, clock=clock)


TAKEN_OVER_DIR = ".taken-over"


def set_aside(root: Path, run_dir: Path) -> Path:
    """Move a run another collector took over out of the root's runs, to ``<root>/.taken-over/``:
    never resumed, listed or uploaded here (its new owner's bundle is the run's), kept for a person to read."""
    target = root / TAKEN_OVER_DIR / run_dir.relative_to(root)
    target.parent.mkdir(parents=True, exist_ok=True)
    os.replace(run_dir, target)
    return target


def store_guard(root: Path, claims: RunClaims | None) -> Callable[[str], bool] | None:
    """What the uploader asks before it stores a sealed run: a run another collector took over
    (this one paused past its lease) is set aside, never stored over the new owner's bundle."""
    if claims is None:
        return None

    def may_store(relative: str) -> bool:
        run_id = Path(relative).name
        if claims.holds(run_id):
            return True
        moved = set_aside(root, root / relative)
        logger.warning("run %s was taken over by another collector: its part here is set aside in %s, not stored",
                       log_id(run_id), moved)
        return False

    return may_store
