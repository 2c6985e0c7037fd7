"""Sample id -> first row, in 16 bytes a slot instead of a Python string and dict entry each.

Every engine checks each sample id against those it has seen (a repeated id is
recorded as ``duplicate_id``, never sent). A dict of id strings costs about
150 bytes a sample and made a run's memory grow with its dataset; this index
keeps a 64-bit digest of each id and its row in two flat arrays (open
addressing, linear probing, at most half full): about 32 bytes a sample.
The digest is Python's own string hash (SipHash-1-3 under a key drawn per
process, computed in C and cached on the string): the index lives only as long
as the run, so a hash that differs from run to run is fine, and it costs a
fraction of a BLAKE2b per sample. Two different ids share a digest with
probability about n^2 / 2^65 (1 in 30 million for a million samples); such a
pair would be reported as a duplicate.
"""

from __future__ import annotations

from array import array

_EMPTY = 0
_MASK64 = (1 << 64) - 1


def _digest(key: str) -> int:
    return (hash(key) & _MASK64) or 1  # 0 marks an empty slot


class IdIndex:
    """A ``setdefault``-only map from string ids to int rows, compact and flat in memory."""

    def __init__(self, capacity: int = 1024) -> None:
        size = 1
        while size < 2 * capacity:
            size *= 2
        self._keys = array("Q", bytes(8 * size))
        self._rows = array("q", bytes(8 * size))
        self._mask = size - 1
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def setdefault(self, key: str, row: int) -> int:
        """The row first stored for ``key``; stores ``row`` when the key is new."""
        digest = _digest(key)
        keys, mask = self._keys, self._mask
        slot = digest & mask
        while True:
            found = keys[slot]
            if found == digest:
                return self._rows[slot]
            if found == _EMPTY:
                break
            slot = (slot + 1) & mask
        keys[slot] = digest
        self._rows[slot] = row
        self._count += 1
        if 2 * self._count > len(keys):
            self._grow()
        return row

    def _grow(self) -> None:
        old_keys, old_rows = self._keys, self._rows
        size = 2 * len(old_keys)
        self._keys = array("Q", bytes(8 * size))
        self._rows = array("q", bytes(8 * size))
        self._mask = size - 1
        for digest, row in zip(old_keys, old_rows):
            if digest != _EMPTY:
                slot = digest & self._mask
                while self._keys[slot] != _EMPTY:
                    slot = (slot + 1) & self._mask
                self._keys[slot] = digest
                self._rows[slot] = row
