"""List filters on a run's tags, metadata and scores (``RunQuery.tags``/``metadata``/``scores``).

Contract::

    conditions = label_filters(query, runs.c.tags, runs.c.metadata, runs.c.scores)   # AND-ed by the caller

The three columns hold JSON lists (``RunRow.tags``: strings; ``metadata``: ``[key, value]``;
``scores``: ``[name, last, count, mean]``). A filter matches whole JSON items with ``LIKE``, the
same SQL in SQLite and PostgreSQL: inside a JSON string every ``"`` is escaped, so ``,"`` and
``["`` only ever start an item, and an item's text never matches part of another.
"""

from __future__ import annotations

from typing import Any

import orjson
from sqlalchemy import func, literal

from .model import RunQuery

__all__ = ["label_filters"]


def _items(column: Any) -> Any:
    """A JSON list of strings as ``,"a","b",``: a tag is then ``,"tag",`` wherever it is."""
    return literal(",") + func.substr(column, 2, func.length(column) - 2) + literal(",")


def _head(*parts: Any) -> str:
    """``["key","value"``: the start of a list item, as it is stored."""
    return orjson.dumps(list(parts)).decode()[:-1]


def label_filters(query: RunQuery, tags: Any, metadata: Any, scores: Any) -> list[Any]:
    """Conditions for ``tag``, ``meta.KEY`` and ``score``/``score.NAME`` filters (every one must hold)."""
    conditions = [_items(tags).contains(f",{orjson.dumps(tag).decode()},", autoescape=True) for tag in query.tags or ()]
    conditions += [metadata.contains(_head(key, value) + "]", autoescape=True) for key, value in query.metadata or ()]
    conditions += [scores.contains(_head(name, *(() if value is None else (value,))) + ",", autoescape=True)
                   for name, value in query.scores or ()]
    return conditions
