"""The seed's workload, built as the issue builds it."""

from __future__ import annotations

import math

import pytest

from engine.errors import ConfigError
from engine.stream.records import Arrivals
from engine.spec import preset_spec
from engine.workload import SEED_PREFIX, Workload, seed_long_text, seed_prompt


def test_seed_prompts_are_slices_of_the_installed_scheduler_source():
    import vllm.core.scheduler

    with open(vllm.core.scheduler.__file__) as f:
        long_text = f.read()
    assert seed_long_text() == long_text
    for i in (0, 1, 999, 5000):
        assert seed_prompt(i) == "```python\n" + long_text[i:i + 1000]


def test_sim_token_counts_use_the_documented_ratio():
    spec = preset_spec("seed-5578", requests=3).validated()
    requests = list(Workload(spec, max_model_len=2048).initial())
    assert [r.request_id for r in requests] == ["0", "1", "2"]
    expected = math.ceil((len(SEED_PREFIX) + 1000) / spec.chars_per_token)
    assert [len(r.prompt_token_ids) for r in requests] == [expected] * 3
    assert all(r.arrival_s == 0.0 for r in requests)  # the seed submits everything at once


def test_arrival_rate_gives_increasing_simulated_arrivals():
    spec = preset_spec("demo", arrival_rate=10.0, seed=3).validated()
    arrivals = [r.arrival_s for r in Workload(spec, 2048).initial()]
    assert arrivals == sorted(arrivals) and arrivals[0] > 0
    assert 1.0 < arrivals[-1] < 20.0  # 48 requests at 10/s: about 4.8 simulated seconds


def test_prompt_longer_than_context_is_refused():
    with pytest.raises(ConfigError, match="does not fit the model's context of 2048"):
        Workload(preset_spec("demo", prompt_len=2048).validated(), 2048)


def test_a_local_tokenizer_gives_real_prompt_lengths(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"[UNK]": 0, **{chr(c): i + 1 for i, c in enumerate(range(32, 127))}}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="[UNK]"))
    backend.pre_tokenizer = pre_tokenizers.Split("", behavior="isolated")
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="[UNK]").save_pretrained(tmp_path)

    from conftest import run_items

    items = run_items(preset_spec("seed-5578", requests=4, max_steps=2, tokenizer=str(tmp_path)))
    arrivals = [i for i in items if isinstance(i, Arrivals)][0]
    # One token per character with this tokenizer: the count is the real one, not the estimate.
    assert arrivals.prompt_tokens == [len(seed_prompt(i)) for i in range(4)]
