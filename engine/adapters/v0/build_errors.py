"""Turn a failure while vLLM builds the engine into one EngineError line that names the cause.

Building a gpu engine loads a tokenizer, downloads or reads weights, allocates the KV cache and
captures CUDA graphs; each can fail with a deep traceback from transformers, huggingface_hub,
torch or vLLM. The user can fix most of them (a wrong --model, too many --num-gpu-blocks, a
dtype the GPU lacks), so they deserve a line saying which, not a traceback.

The cause is recognised from the exception's type and message, most specific first. Anything
unrecognised still becomes one line ("vLLM could not build the engine: <type>: <first line>").
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from engine.errors import EngineError, ObservatoryError, first_line

# (cause, what to do, exception type names, substrings of the message); first match wins
_CAUSES: tuple[tuple[str, str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("out of memory", "lower --num-gpu-blocks or --max-num-seqs, or free the GPU",
     ("OutOfMemoryError",),
     ("out of memory", "no available memory for the cache blocks", "cuda error: out of memory",
      "cudaerrormemoryallocation")),
    ("unsupported dtype", "this GPU cannot run the model's dtype; pick another model or GPU",
     (), ("bfloat16 is only supported", "dtype", "compute capability")),
    ("model not found", "give a local model directory with config, weights and tokenizer, or a "
                        "Hugging Face id that is reachable",
     ("RepositoryNotFoundError", "LocalEntryNotFoundError", "EntryNotFoundError",
      "GatedRepoError", "FileNotFoundError"),
     ("can't load tokenizer", "can't load the configuration", "does not appear to have a file",
      "no such file or directory", "is not a local folder", "not a valid model identifier",
      "couldn't connect to", "we couldn't connect", "path_or_model_id", "tokenizer",
      "safetensors", "no file named")),
)


_MAX_DETAIL = 200  # transformers' messages run on; the cause and the start are what help


def _clipped_line(exc: BaseException) -> str:
    line = first_line(exc)
    return line if len(line) <= _MAX_DETAIL else line[:_MAX_DETAIL - 1].rstrip() + "…"


def classify(exc: BaseException) -> str:
    """The one-line message for a build failure."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    message = str(exc).lower()
    for cause, hint, types, needles in _CAUSES:
        if names.intersection(types) or any(needle in message for needle in needles):
            return f"{cause}: {type(exc).__name__}: {_clipped_line(exc)}; {hint}"
    return f"vLLM could not build the engine: {type(exc).__name__}: {_clipped_line(exc)}"


@contextlib.contextmanager
def build_errors(model: str) -> Iterator[None]:
    """Run vLLM's engine construction; re-raise any failure as a one-line EngineError (our own
    one-line errors pass through)."""
    try:
        yield
    except ObservatoryError:
        raise
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001  torch/transformers/hub raise many kinds
        raise EngineError(f"cannot build the engine for {model!r}: {classify(exc)}") from None
