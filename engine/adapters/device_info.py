"""Which hardware and software a recording's measured times come from (the Header's `device`).

A gpu recording without its GPU, CUDA, torch and driver versions cannot be tied to the machine
that produced it, so its `exec_s` column would be numbers without units. The sim backend
records torch's version and "cpu" (its measured times are the do-nothing executor's).

Every probe is best effort: a missing field is an empty string, never an error, because a
recording that lacks the driver version is still worth more than no recording.
"""

from __future__ import annotations

import subprocess

from engine.stream.records import DeviceInfo


def describe(backend: str) -> DeviceInfo:
    """The device the engine runs on for `backend` ("sim" or "gpu")."""
    try:
        import torch
    except Exception:  # noqa: BLE001  torch is vLLM's dependency; be safe anyway
        return DeviceInfo(name="cpu")
    cuda = torch.version.cuda or ""
    if backend != "gpu" or not torch.cuda.is_available():
        return DeviceInfo(name="cpu", torch=str(torch.__version__), cuda=str(cuda))
    index = torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    return DeviceInfo(name=str(props.name), torch=str(torch.__version__), cuda=str(cuda),
                      driver=driver_version(), capability=f"{props.major}.{props.minor}",
                      memory_gib=round(props.total_memory / (1 << 30), 2))


def driver_version() -> str:
    """The NVIDIA driver version, from NVML (installed with vLLM) or nvidia-smi."""
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # noqa: BLE001  no NVML: try the command line tool
        pass
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=10, check=True)
        return out.stdout.strip().splitlines()[0]
    except Exception:  # noqa: BLE001
        return ""
