"""`observatory exec`'s foothold in every Python process of the user's command.

`observatory exec` puts this directory first on PYTHONPATH, so every Python process the command
starts (the script, vLLM's EngineCore process, multiprocessing workers, verl's workers) runs
this file at start-up. It does almost nothing then: it runs the sitecustomize that was there
before (the next one on sys.path, if any) and adds an import hook. When vLLM's V0 engine module
(`vllm.engine.llm_engine`) or V1 scheduler module (`vllm.v1.core.sched.scheduler`) finishes
importing (and, for the sim on a release that detects its platform, `vllm.platforms`, and on
V1 `vllm.engine.arg_utils`, which 0.18 imports before its scheduler module), the hook calls
engine.attached.api.install_from_env, which attaches every engine the
process builds from then on, configured by the OBSERVATORY_* environment
(engine.attached.env). Processes that never import vLLM pay for one meta-path lookup per import.

Nothing here may break the user's program: any failure is one line on stderr and the program
runs on unwatched.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_TRIGGERS = {"vllm.platforms": "platform", "vllm.engine.llm_engine": "v0",
             "vllm.v1.core.sched.scheduler": "v1", "vllm.engine.arg_utils": "args"}


def _chain() -> None:
    """Run the sitecustomize this one shadows (the next on sys.path), as Python would have."""
    paths = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", paths)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["_observatory_chained_sitecustomize"] = module
    spec.loader.exec_module(module)


def _warn(message: str) -> None:
    try:
        sys.stderr.write(f"WARNING observatory: {message}\n")
    except Exception:  # noqa: BLE001
        pass


class _AfterImport(importlib.abc.Loader):
    def __init__(self, loader, kind: str) -> None:  # noqa: ANN001
        self._loader = loader
        self._kind = kind

    def __getattr__(self, name):  # noqa: ANN001, ANN204  get_source, is_package, ...
        return getattr(self._loader, name)

    def create_module(self, spec):  # noqa: ANN001, ANN201
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:  # noqa: ANN001
        self._loader.exec_module(module)
        try:
            from engine.attached.api import install_from_env

            install_from_env(self._kind)
        except Exception as exc:  # noqa: BLE001  never harm the user's program
            _warn(f"cannot attach to vLLM ({type(exc).__name__}: {exc}); it runs unwatched")


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):  # noqa: ANN001, ANN201
        kind = _TRIGGERS.get(fullname)
        if kind is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _AfterImport(spec.loader, kind)
                return spec
        return None


try:
    _chain()
except Exception as _exc:  # noqa: BLE001
    _warn(f"the sitecustomize before observatory exec's failed: {_exc}")
if not any(isinstance(f, _Finder) for f in sys.meta_path):
    sys.meta_path.insert(0, _Finder())
