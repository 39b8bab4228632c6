"""vLLM 0.18's offloading connector, as the CPU tier sees it: refused, in one line.

0.18 has an `OffloadingConnector` (`kv_connector/v1/offloading_connector.py`), but its worker
contract is not the one the sim's worker plays (engine.adapters.v1.sim_offload_worker, 0.29+'s
`offloading/` package): its metadata is keyed by request (`reqs_to_load` / `reqs_to_store`,
no job ids, no `jobs_to_flush`, no sync loads), the worker numbers the jobs itself, and a
store is reported done only as a finished request's `finished_sending` (or dropped at its
preemption), so the CPU blocks it wrote become loadable only then. Playing that is a worker of
its own; until one is written the tier is refused on 0.18 rather than run with a worker that
would answer vLLM in another release's terms. What is read: `KVTransferConfig.kv_connector`.
"""

from __future__ import annotations

from typing import Any

from engine.errors import ConfigError
from engine.spec import RunSpec

REFUSAL = ("--kv-offloading-size: the CPU tier is not supported on vLLM 0.18.0 (its "
           "offloading connector's worker contract is not the one the sim plays): use "
           "--kv-offloading-size 0, or vLLM 0.33.0 (pip install -e '.[vllm033,test]')")


def engine_kwargs(spec: RunSpec) -> dict[str, Any]:
    """EngineArgs for the CPU tier: none; a spec that asks for one is refused."""
    if spec.kv_offloading_gib:
        raise ConfigError(REFUSAL)
    return {}


def is_offloading(vllm_config: Any) -> bool:
    """An engine someone else configured with the connector (`observatory exec --sim`) is
    refused too: without the worker's answers vLLM would hold finished requests' blocks."""
    config = vllm_config.kv_transfer_config
    if config is not None and config.kv_connector == "OffloadingConnector":
        raise ConfigError(REFUSAL)
    return False


def connector_of(scheduler: Any) -> Any:
    """No tier the observatory reads on 0.18."""
    return None
