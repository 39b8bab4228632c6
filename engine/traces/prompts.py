"""Prompt tokens for a trace's requests, and how much of them a prefix cache could reuse.

A trace gives lengths, not text; the scheduler sees only token ids and, with prefix caching,
which blocks of them repeat. So each request gets ids no other request has (its line number is
encoded in its first two tokens), except where the trace says prompts share a prefix:

- Mooncake's `hash_ids`: the prompt is the concatenation of one 512-token block per id
  (truncated to input_length; a prompt longer than its ids ends with its own tokens). A block's
  tokens depend only on its id, and its first two tokens encode the id, so two requests whose
  ids agree for k leading blocks share exactly their first 512*k tokens. vLLM hashes its own
  blocks (--block-size tokens, 16 by default) chained from the start of the prompt, so a trace
  block is 512 / block_size whole engine blocks when block_size divides 512 (8, 16, 32, 64, 128,
  256, 512), and they hit exactly when the trace's ids agree. With another block size the
  engine block that straddles two trace blocks is shared only when both are.
- `--trace-n N`: the N samples of a request share its whole prompt (vLLM's V1 frontend turns
  n=N into N requests with one prompt; V0 runs them as one group of N sequences).

Ids stay below 50,000 (inside every packaged model's vocabulary), from 3 up (clear of BOS/EOS).
"""

from __future__ import annotations

from collections import deque
from functools import lru_cache

from engine.traces.rows import BLOCK_TOKENS

_SPAN = 49_000  # two tokens of base _SPAN encode a line or id up to 2.4e9
_CYCLE = 49_990
# One cycle of the stride-17 pattern every prompt's tokens follow (17 and 49,990 are coprime,
# so it visits every id once), twice over: a prompt's pattern is a slice of it, made in C and
# sharing these int objects, which keeps a million prompts fast and their memory flat.
_PATTERN = [(17 * j) % _CYCLE + 3 for j in range(_CYCLE)] * 2
_CACHED_BLOCKS = 1024


def _pair(value: int) -> list[int]:
    return [(value // _SPAN) % _SPAN + 3, value % _SPAN + 3]


def _pattern(seed: int, count: int) -> list[int]:
    """`count` tokens of the pattern from a place chosen by `seed`."""
    start = seed % _CYCLE
    if count <= _CYCLE:
        return _PATTERN[start:start + count]
    whole, rest = divmod(count, _CYCLE)
    return (_PATTERN[start:start + _CYCLE] * whole) + _PATTERN[start:start + rest]


@lru_cache(maxsize=_CACHED_BLOCKS)
def block_tokens(hash_id: int) -> tuple[int, ...]:
    """The 512 tokens of trace block `hash_id`: the id, then the pattern seeded by it."""
    return tuple(_pair(hash_id) + _pattern(hash_id * 7919, BLOCK_TOKENS - 2))


def own_tokens(line: int, count: int) -> list[int]:
    """`count` tokens no other line has: the line number, then the pattern seeded by it."""
    head = _pair(line + 1_000_000_000)  # never a hash id's pair for ids < 1e9
    if count <= 2:
        return head[:count]
    return head + _pattern(line * 104_729, count - 2)


def prompt_tokens(line: int, input_len: int, hash_ids: list[int] | None) -> list[int]:
    """Request `line`'s prompt: its trace blocks, then its own tokens, `input_len` in all."""
    if not hash_ids:
        return own_tokens(line, input_len)
    ids: list[int] = []
    for hash_id in hash_ids:
        if len(ids) >= input_len:
            break
        ids.extend(block_tokens(hash_id))
    if len(ids) >= input_len:
        return ids[:input_len]
    return ids + own_tokens(line, input_len - len(ids))


@lru_cache(maxsize=_CACHED_BLOCKS)
def engine_block_tokens(block_id: int, size: int) -> tuple[int, ...]:
    """The `size` tokens of a recording's block `block_id` (engine.fingerprint's numbers): the
    id, then the pattern seeded by it. Not a trace block's tokens: the pattern starts elsewhere
    (and every id's first two tokens differ), so the two never meet in one run."""
    head = _pair(block_id + 2_000_000_000)
    return tuple((head + _pattern(block_id * 104_723 + 7, max(0, size - 2)))[:size])


def block_prompt(line: int, input_len: int, block_ids: list[int], block_size: int) -> list[int]:
    """A recorded request's prompt from its blocks (engine.fingerprint): each block's tokens
    depend only on its number, so requests that shared blocks share tokens there and nowhere
    else, as vLLM's prefix cache saw them; the last block may be partial. A prompt longer than
    its blocks ends with tokens of its own."""
    ids: list[int] = []
    for block_id in block_ids:
        if len(ids) >= input_len:
            break
        ids.extend(engine_block_tokens(block_id, block_size))
    if len(ids) >= input_len:
        return ids[:input_len]
    return ids + own_tokens(line, input_len - len(ids))


MEMORY_BLOCKS = 200_000
"""Trace blocks PrefixAllowance remembers (the most recent): 100M tokens, more than any KV
cache and CPU tier hold, in ~20 MB, so a million-request trace streams in flat memory."""


class PrefixAllowance:
    """Prompt tokens a prefix cache that kept everything could serve, sample by sample: the
    upper bound a run's prefix-cache hits are measured against. Blocks are keyed by their
    chain of ids (a block is reusable only after the same ids from the first one on); the
    last MEMORY_BLOCKS distinct blocks are remembered."""

    def __init__(self, block_size: int) -> None:
        self.block_size = block_size
        self._seen: set[int] = set()
        self._order: deque[int] = deque()  # the oldest is forgotten first
        self.tokens = 0

    def _remember(self, key: int) -> None:
        self._seen.add(key)
        self._order.append(key)
        if len(self._order) > MEMORY_BLOCKS:
            self._seen.discard(self._order.popleft())

    def add(self, input_len: int, hash_ids: list[int] | None, repeat: bool,
            block_tokens: int = BLOCK_TOKENS) -> None:
        """One sample; `repeat`: an earlier sample had this very prompt (--trace-n);
        `block_tokens`: tokens per id (a Mooncake trace's 512, or a recording's block size)."""
        shared = input_len if repeat else 0
        if hash_ids and not repeat:
            key, blocks = block_tokens, 0
            for hash_id in hash_ids[:-(-input_len // block_tokens)]:
                key = hash((key, hash_id))
                if key not in self._seen:
                    self._remember(key)
                    break
                blocks += 1
            for hash_id in hash_ids[blocks + 1:-(-input_len // block_tokens)]:
                key = hash((key, hash_id))
                self._remember(key)
            shared = min(input_len, blocks * block_tokens)
        usable = min(shared, input_len - 1)  # vLLM always computes the last prompt token
        self.tokens += usable - usable % self.block_size
