"""Prefix fingerprints: which prompt blocks a request shares with the requests before it, with
no token id and no text kept.

A prompt is cut into KV blocks of the engine's block size, and each block is named by a hash
chained from the prompt's first token (vLLM's own block hashes where the release computes them,
else the same chained hash of the block's tokens: engine/adapters; the last, partial block by
`tail_name`), so two blocks have the same name exactly when their prompts agree from the first
token to the end of that block. A
recording keeps no hash (a hash of a few tokens can be tested against guesses of the prompt): it
numbers the blocks 0, 1, 2... in the order they first arrive, Mooncake's `hash_ids` per engine
block. Because a name covers its whole prefix, a request's blocks are always a run it shares
(the chain that ends at one earlier block) followed by blocks no earlier request had, which take
the next numbers in order. So each request is two numbers, `(shared, own)`:

    shared  the number of the last block it shares, plus one (0: it shares none)
    own     how many blocks of its own follow

`BlockNumbering` makes them as requests arrive (in the engine's process, bounded memory);
`BlockChains` turns them back into each request's list of block numbers, replaying the
numbering in arrival order. A recording's fingerprints read only from its start.
"""

from __future__ import annotations

from array import array
from itertools import islice
from typing import Any, Hashable, Iterable, Sequence

MIN_REMEMBERED = 1 << 16
"""Block names a BlockNumbering remembers at least (about 10 MB): `remembering` raises it to a
few times the KV cache, so a block vLLM may still hold is never forgotten."""


def remembering(cached_blocks: int) -> int:
    """How many block names to remember for an engine that can keep `cached_blocks` blocks
    (GPU plus a CPU tier): four times that, at least MIN_REMEMBERED."""
    return max(MIN_REMEMBERED, 4 * cached_blocks)


def chained_names(tokens: Sequence[int], block_size: int) -> list[Hashable]:
    """The chained name of each block of `tokens`, the last partial one included (`tail_name`):
    vLLM's V0 prefix-cache hash, `hash((is_first_block, previous block's hash, *block
    tokens))` (its `PrefixCachingBlock.hash_block_tokens`, computed here without a call per
    block: tests/test_rerun_adapters.py holds the two equal). Ints and tuples hash alike in
    every process (no PYTHONHASHSEED), so two processes name a block alike."""
    if not isinstance(tokens, (list, tuple)):
        tokens = list(tokens)
    names: list[Hashable] = []
    previous: Any = None
    full = len(tokens) - len(tokens) % block_size
    for start in range(0, full, block_size):
        previous = hash((previous is None, previous, *tokens[start:start + block_size]))
        names.append(previous)
    if full < len(tokens):
        names.append(tail_name(previous, tokens[full:]))
    return names


def tail_name(previous: Hashable | None, tail: Sequence[int]) -> Hashable:
    """The name of a prompt's last, partial block (`previous`: the last full block's name).
    vLLM never caches a partial block, but two requests with one whole prompt (vLLM's n=4
    made into four requests) share more than their full blocks: the blocks their outputs fill
    start with it. The name keeps them alike in a re-run."""
    return hash(("tail", previous, *tail))


class BlockNumbering:
    """Numbers each request's chained block names; `fingerprint` gives its (shared, own).

    Names are remembered most recently used last, up to `limit` of them: a name forgotten and
    seen again is a block of its own (a new number), as it would be for a cache that has long
    evicted it. Once one block of a request is its own every later one is too (its name
    includes a prefix no earlier request had), so they are numbered without a lookup."""

    def __init__(self, limit: int = MIN_REMEMBERED) -> None:
        self.limit = max(1, limit)
        self._numbers: dict[Hashable, int] = {}
        self.next_number = 0

    def __len__(self) -> int:
        return len(self._numbers)

    def fingerprint(self, names: Iterable[Hashable]) -> tuple[int, int]:
        """(shared, own) of a prompt whose full blocks are named `names`, first block first."""
        numbers = self._numbers
        shared = 0
        own = 0
        for name in names:
            if not own:
                number = numbers.pop(name, None)
                if number is not None:
                    numbers[name] = number  # most recently used: last
                    shared = number + 1
                    continue
            numbers[name] = self.next_number
            self.next_number += 1
            own += 1
        if own and len(numbers) > self.limit + (self.limit >> 3):  # forget in batches
            for name in list(islice(numbers, len(numbers) - self.limit)):
                del numbers[name]
        return shared, own


class BlockChains:
    """Each request's block numbers from its (shared, own), fed in arrival order.

    Keeps one parent number per block (8 bytes each): a shared run is walked back from its last
    block. Raises ValueError for a fingerprint that names a block not yet numbered (a damaged
    recording, or one that starts mid-run: the caller decides)."""

    def __init__(self) -> None:
        self._parent = array("q")

    @property
    def blocks(self) -> int:
        return len(self._parent)

    def expand(self, shared: int, own: int) -> list[int]:
        parent = self._parent
        if shared > len(parent):
            raise ValueError(f"a fingerprint shares block {shared - 1}, and only "
                             f"{len(parent)} blocks have been numbered")
        chain: list[int] = []
        at = shared - 1
        while at >= 0:
            chain.append(at)
            at = parent[at]
        chain.reverse()
        first = len(parent)
        before = shared - 1
        for number in range(first, first + own):
            parent.append(before)
            chain.append(number)
            before = number
        return chain
