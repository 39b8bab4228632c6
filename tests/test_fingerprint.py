"""Prefix fingerprints (engine.fingerprint): two numbers a request, no token kept, and the
requests' shared blocks come back exactly; bounded memory in the engine's process. No vLLM."""

from __future__ import annotations

import random

from engine.fingerprint import BlockChains, BlockNumbering, chained_names, tail_name


def _prompt(seed: int, length: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(3, 50_000) for _ in range(length)]


def test_shared_prefixes_come_back_as_the_same_block_numbers():
    system = _prompt(1, 64)  # four blocks of 16 every request starts with
    prompts = [system + _prompt(10 + i, 40) for i in range(5)]
    prompts.append(list(prompts[2]))  # a request repeated whole (vLLM's n=2 as two requests)
    prompts.append(_prompt(99, 30))  # one that shares nothing
    numbering, chains = BlockNumbering(), BlockChains()
    expanded = []
    for prompt in prompts:
        shared, own = numbering.fingerprint(chained_names(prompt, 16))
        expanded.append(chains.expand(shared, own))
    # each prompt has ceil(len / 16) blocks, the last one partial
    assert [len(b) for b in expanded] == [-(-len(p) // 16) for p in prompts]
    for i, a in enumerate(prompts):
        for j, b in enumerate(prompts):
            agree = 0
            while agree < min(len(a), len(b)) and a[agree] == b[agree]:
                agree += 1
            blocks = sum(1 for x, y in zip(expanded[i], expanded[j]) if x == y)
            full_agree = agree // 16 + (1 if a == b and len(a) % 16 else 0)
            assert blocks == full_agree, (i, j)
    assert expanded[5] == expanded[2]  # the whole prompt, its partial block included
    assert set(expanded[6]).isdisjoint(set().union(*expanded[:6]))


def test_a_fingerprint_is_two_numbers_and_names_no_token():
    numbering = BlockNumbering()
    first = numbering.fingerprint(chained_names(_prompt(1, 100), 16))
    second = numbering.fingerprint(chained_names(_prompt(1, 64) + _prompt(2, 36), 16))
    assert first == (0, 7)  # nothing before it; 6 full blocks and a partial one
    assert second == (4, 3)  # shares blocks 0..3, then three of its own


def test_forgetting_keeps_what_is_used_and_never_contradicts_the_decoder():
    """A block name is remembered most recently used last: a prefix every request reuses
    (a system prompt) is never forgotten, however many others come and go."""
    system = _prompt(7, 32)
    numbering, chains = BlockNumbering(limit=50), BlockChains()
    for i in range(300):
        prompt = system + _prompt(1000 + i, 48)
        shared, own = numbering.fingerprint(chained_names(prompt, 16))
        blocks = chains.expand(shared, own)
        if i:
            assert blocks[:2] == [0, 1]  # the system prompt's two blocks, always shared
        assert len(numbering) <= 50 + 50 // 8  # forgotten in batches
    # a request seen long ago and forgotten comes back as blocks of its own, consistently
    shared, own = numbering.fingerprint(chained_names(system + _prompt(1000, 48), 16))
    assert (shared, own) == (2, 3)


def test_the_partial_block_is_named_after_its_prefix():
    assert tail_name(None, [5, 6]) == tail_name(None, [5, 6])
    assert tail_name(1, [5, 6]) != tail_name(2, [5, 6])
    assert chained_names([], 16) == []
    assert len(chained_names(list(range(32)), 16)) == 2
