"""A cache bounded by bytes, evicting the least recently used entries first (never emptied wholesale).

Contract::

    cache = ByteLRU(max_bytes)
    cache.get(key) -> value | None           # a hit makes the entry the most recently used
    cache.put(key, value, nbytes)            # evicts the oldest entries until the total fits
    cache.pop(key); len(cache); cache.nbytes

An entry larger than the whole bound is not kept (the caller still has its value). Sizes are the
caller's estimate of what an entry holds in memory. Safe to use from several threads.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

__all__ = ["ByteLRU"]


class ByteLRU:
    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._entries: OrderedDict[Hashable, tuple[Any, int]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: Hashable) -> Any:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            self._entries.move_to_end(key)
            return entry[0]

    def put(self, key: Hashable, value: Any, nbytes: int) -> None:
        with self._lock:
            self._drop(key)
            if nbytes > self.max_bytes:
                return
            self._entries[key] = (value, nbytes)
            self.nbytes += nbytes
            while self.nbytes > self.max_bytes:
                self.nbytes -= self._entries.popitem(last=False)[1][1]

    def pop(self, key: Hashable) -> None:
        with self._lock:
            self._drop(key)

    def _drop(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self.nbytes -= entry[1]
