"""What a re-run needs of each request a V1 scheduler takes (engine.analysis.rerun): its
samples, output limit and prompt fingerprint as it arrives, and its output length when it
finishes. The Session's driver and an attached tap share it.

It reads vLLM's `Request` only (the same names from 0.18 to 0.34): `request_id`,
`num_prompt_tokens`, `prompt_token_ids`, `max_tokens`, `sampling_params.n`, `num_output_tokens`,
and `block_hashes`, the chained hashes of the prompt's full blocks that vLLM computes as the
request is made when prefix caching (or a KV connector) is on. Without them (prefix caching
off) the prompt's blocks are named by the same chained hash V0's prefix cache uses
(engine.fingerprint.chained_names); the last, partial block is named by
engine.fingerprint.tail_name either way. Only the blocks' numbers in the recording are kept
(engine.fingerprint), never a token.
"""

from __future__ import annotations

from typing import Any

from engine.adapters.driver import RequestFacts
from engine.fingerprint import BlockNumbering, chained_names, remembering, tail_name


class RequestFactsReader:
    """One scheduler's requests: facts as they arrive, output lengths as they finish.

    `arrived` keeps the request until `finished_lens` names it (vLLM frees its Request when it
    finishes, and its output count with it): one dict entry per unfinished request."""

    def __init__(self, block_size: int, cached_blocks: int) -> None:
        self.block_size = block_size
        self.numbering = BlockNumbering(remembering(cached_blocks))
        self._live: dict[str, Any] = {}

    def arrived(self, request: Any) -> RequestFacts:
        self._live[request.request_id] = request
        params = request.sampling_params
        return RequestFacts(n=int(getattr(params, "n", 1) or 1) if params is not None else 1,
                            max_tokens=int(request.max_tokens),
                            prefix=self.numbering.fingerprint(self._names(request)))

    def _names(self, request: Any) -> list[Any]:
        size = self.block_size
        prompt = request.prompt_token_ids
        if prompt is None:  # prompt embeddings: no token to name a block by
            return []
        full = request.num_prompt_tokens // size
        hashes = getattr(request, "block_hashes", None)
        if not hashes or len(hashes) != full:  # none (prefix caching off), or another size
            return chained_names(prompt, size)
        names = list(hashes)
        if full * size < request.num_prompt_tokens:
            names.append(tail_name(hashes[-1], list(prompt[full * size:])))
        return names

    def finished_lens(self, finished: list[str]) -> list[int]:
        """The output tokens of each request in `finished` (0 for one never seen arrive)."""
        live = self._live
        lens = []
        for rid in finished:
            request = live.pop(rid, None)
            lens.append(int(request.num_output_tokens) if request is not None else 0)
        return lens
