"""What a re-run needs of each request a V0 engine takes (engine.analysis.rerun): its samples,
output limit and prompt fingerprint as it arrives. (Its samples' output lengths are read as they
finish: the hook's `free_seq` and engine.adapters.v0.step_record.) The Session's driver and an
attached tap share it.

It reads the SequenceGroup(s) vLLM made of the request (0.5.0.post1 to 0.10.2 alike; from 0.6.4
an n>1 request is n groups of one sample): `sampling_params` (`n`, `max_tokens`) and
`prompt_token_ids`. The prompt's blocks are named by vLLM's own prefix-cache hash (its
`PrefixCachingBlock.hash_block_tokens`, chained from the first block: engine.fingerprint
computes the same formula); only the blocks' numbers in the recording are kept
(engine.fingerprint), never a token.
"""

from __future__ import annotations

from typing import Any

from engine.adapters.driver import RequestFacts
from engine.fingerprint import BlockNumbering, chained_names, remembering

DEFAULT_MAX_TOKENS = 16  # vLLM V0's SamplingParams default, for params that give None


class RequestFactsReader:
    """One scheduler's requests, as they arrive."""

    def __init__(self, block_size: int, cached_blocks: int) -> None:
        self.block_size = block_size
        self.numbering = BlockNumbering(remembering(cached_blocks))

    def arrived(self, groups: list[Any]) -> RequestFacts:
        """The facts of one request, from the group(s) vLLM made of it."""
        group = groups[0]
        params = group.sampling_params
        n = sum(int(getattr(g.sampling_params, "n", 1) or 1) for g in groups)
        max_tokens = getattr(params, "max_tokens", None)
        names = chained_names(group.prompt_token_ids, self.block_size)
        return RequestFacts(n=n, max_tokens=int(max_tokens if max_tokens is not None
                                                else DEFAULT_MAX_TOKENS),
                            prefix=self.numbering.fingerprint(names))


def added_groups(scheduler: Any, before: int) -> list[Any]:
    """The groups `add_request` put at the end of the waiting queue, which held `before`."""
    waiting = scheduler.waiting
    return [waiting[i] for i in range(before, len(waiting))]
