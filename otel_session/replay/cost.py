"""What model calls cost, from a dated price table (USD per million tokens).

Contract::

    prices = price_table()                   # the shipped table, or the file $OTEL_SESSION_PRICES names
    prices.price_of("gpt-4o-mini-2024-07-18")    # -> ModelPrice(input, output, cached_input) | None
    prices.cost("gpt-4o-mini", {"input_tokens": 1200, "output_tokens": 80})  # -> 0.000228, or None
    summarize(model_calls, prices)           # -> {"usd", "priced_calls", "unpriced_models", "prices_as_of"}

A model is priced by its name or the longest table entry its name starts with (``gpt-4o-mini-2024-07-18``
is ``gpt-4o-mini``; a provider prefix such as ``openai/`` is ignored). An unknown model has **no
price**: its cost is None and it is named in ``unpriced_models``, never counted as 0. Cached input
tokens (``usage.cached_input_tokens``, a part of ``input_tokens``) are priced at ``cached_input``.

The shipped table (``prices.json``, with its ``as_of`` date) can be replaced by a file of the same
shape: ``$OTEL_SESSION_PRICES``. A file that cannot be read or has no valid ``models`` is one
warning, and the shipped table is used.
"""

from __future__ import annotations

import functools
import hashlib
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

import orjson

from otel_session.core.log import get_logger, log_setting

__all__ = ["ENV_PRICES", "ModelPrice", "PriceTable", "price_table", "summarize"]

ENV_PRICES = "OTEL_SESSION_PRICES"
_PER_TOKEN = 1 / 1_000_000

logger = get_logger(__name__)


@dataclass(frozen=True)
class ModelPrice:
    """USD per million tokens."""

    input: float
    output: float
    cached_input: float | None = None


@dataclass(frozen=True)
class PriceTable:
    as_of: str | None
    models: Mapping[str, ModelPrice]

    @property
    def fingerprint(self) -> str:
        """Equal for equal tables: what facts kept for a sealed run were priced with."""
        document = {"as_of": self.as_of, "models": {name: list(vars(price).values()) for name, price in sorted(self.models.items())}}
        return hashlib.sha256(orjson.dumps(document)).hexdigest()[:16]

    @classmethod
    def from_document(cls, document: Any) -> PriceTable:
        """A table from the JSON shape of ``prices.json``; ``ValueError`` naming what is wrong."""
        if not isinstance(document, dict) or not isinstance(document.get("models"), dict):
            raise ValueError("expected an object with a 'models' object")
        models = {}
        for name, price in document["models"].items():
            fields = {key: price.get(key) for key in ("input", "output", "cached_input")} if isinstance(price, dict) else {}
            if not all(isinstance(fields.get(key), (int, float)) and fields[key] >= 0 for key in ("input", "output")):
                raise ValueError(f"model {name!r}: 'input' and 'output' must be non-negative numbers")
            cached = fields.get("cached_input")
            models[str(name).lower()] = ModelPrice(float(fields["input"]), float(fields["output"]),
                                                   float(cached) if isinstance(cached, (int, float)) else None)
        as_of = document.get("as_of")
        return cls(as_of if isinstance(as_of, str) else None, models)

    def price_of(self, model: str | None) -> ModelPrice | None:
        if not model:
            return None
        name = model.lower().rsplit("/", 1)[-1]
        found = self.models.get(name)
        if found is not None:
            return found
        prefixes = [known for known in self.models if name.startswith(known + "-")]
        return self.models[max(prefixes, key=len)] if prefixes else None

    def cost(self, model: str | None, usage: Mapping[str, int]) -> float | None:
        """USD of one call, or None when the model has no price or the call counted no tokens."""
        price = self.price_of(model)
        if price is None or not usage:
            return None
        input_tokens = usage.get("input_tokens") or 0
        cached = min(usage.get("cached_input_tokens") or 0, input_tokens) if price.cached_input is not None else 0
        total = ((input_tokens - cached) * price.input + cached * (price.cached_input or 0)
                 + (usage.get("output_tokens") or 0) * price.output)
        return round(total * _PER_TOKEN, 10)


def summarize(model_calls: Iterable[Mapping[str, Any]], prices: PriceTable) -> dict[str, Any]:
    """The cost of ``model_calls`` (each with ``model`` and ``usage``, as facts give them): USD of
    the priced ones (None when none is), how many were priced, and the models with no price."""
    usd, priced, unpriced = 0.0, 0, set()
    for call in model_calls:
        cost = prices.cost(call.get("model"), call.get("usage") or {})
        if cost is None:
            unpriced.add(call.get("model") or "?")
        else:
            usd += cost
            priced += 1
    return {"usd": round(usd, 10) if priced else None, "priced_calls": priced,
            "unpriced_models": sorted(unpriced), "prices_as_of": prices.as_of}


@functools.lru_cache(maxsize=1)
def _shipped() -> PriceTable:
    return PriceTable.from_document(orjson.loads(resources.files(__package__).joinpath("prices.json").read_bytes()))


@functools.lru_cache(maxsize=8)
def _from_file(path: str, mtime_ns: int) -> PriceTable:
    del mtime_ns  # part of the cache key: an edited file is read again
    with open(path, "rb") as handle:
        return PriceTable.from_document(orjson.loads(handle.read()))


def price_table() -> PriceTable:
    """The table in force: ``$OTEL_SESSION_PRICES``'s file when it names a valid one, else the shipped one."""
    path = os.environ.get(ENV_PRICES)
    if not path:
        return _shipped()
    try:
        mtime_ns = os.stat(path).st_mtime_ns
        return _from_file(path, mtime_ns)
    except (OSError, ValueError) as exc:
        _warn_once(path, str(exc))
        return _shipped()


@functools.lru_cache(maxsize=8)
def _warn_once(path: str, reason: str) -> None:
    logger.warning("$%s=%s is not a price table (%s); using the shipped prices",
                   log_setting(ENV_PRICES), log_setting(path), log_setting(reason))
