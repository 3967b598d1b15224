"""Energy of a job's fit and predict, with the source of every figure.

Read directly, no estimate:

- ``nvml_counter``: NVML's total-energy counter of each of the job's GPUs (millijoules since the
  driver loaded; Volta and newer), read before and after.
- ``nvml_power``: where a GPU has no counter, its power draw (NVML, milliwatts) sampled on a thread
  and integrated over the interval (power x time).
- ``rapl``: the CPU packages' energy from Linux powercap RAPL (``/sys/class/powercap/intel-rapl:N/
  energy_uj``), where the files exist and are readable (often root-only; absent in most VMs). It is
  the whole package's energy: other processes on the same package count too. The environment
  variable ``AUTOML_EVAL_POWERCAP_ROOT`` names another folder laid out like /sys/class/powercap to
  read instead (the tests' fake counters); the job's worker inherits it from the harness.
- ``none``: no source here; the figure is absent and the reason says why.

nvidia-ml-py is used directly (it is already the project's GPU sampler): zeus and codecarbon add a
dependency for the same two reads, and codecarbon falls back to a TDP-based estimate where nothing
is readable, which this project must not report as a measurement.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RAPL_ROOT = Path("/sys/class/powercap")
# Read when a meter is made, not at import: the warm fork server imports this module before any
# job, and each worker gets the environment of its own job.
RAPL_ROOT_ENV = "AUTOML_EVAL_POWERCAP_ROOT"
POWER_SAMPLE_S = 0.05
Source = str  # nvml_counter | nvml_power | rapl | none


@dataclass
class EnergyReading:
    """Joules over one interval, and where they came from ("rapl+nvml_counter" when both)."""

    joules: float | None
    source: Source
    reason: str = ""  # why a part, or all, is missing
    parts: dict[str, float] = field(default_factory=dict)  # source -> joules


def powercap_root() -> Path:
    """The powercap folder this process reads: RAPL_ROOT_ENV's where it is set, else the host's."""
    configured = os.environ.get(RAPL_ROOT_ENV, "").strip()
    return Path(configured) if configured else RAPL_ROOT


def _load_nvml() -> Any:
    import pynvml  # from nvidia-ml-py, only where the job has GPUs

    return pynvml


class _RaplPackages:
    """The CPU packages' energy counters, or why there are none."""

    def __init__(self, root: Path) -> None:
        self.domains: list[tuple[Path, float]] = []  # (energy_uj file, wrap range in µJ)
        self.reason = ""
        candidates = sorted(root.glob("intel-rapl:*")) if root.is_dir() else []
        # Top-level domains are the packages (intel-rapl:0); intel-rapl:0:0 are their cores, dram, ...
        packages = [path for path in candidates if path.name.count(":") == 1]
        for package in packages:
            energy = package / "energy_uj"
            try:
                energy.read_text()
                wrap = float((package / "max_energy_range_uj").read_text())
            except (OSError, ValueError) as error:
                self.reason = f"RAPL's {energy} is not readable ({error.__class__.__name__})"
                continue
            self.domains.append((energy, wrap))
        if not packages:
            self.reason = f"no RAPL powercap domains under {root} (this machine does not expose them)"

    def read_uj(self) -> list[float]:
        return [float(path.read_text()) for path, _ in self.domains]

    def joules(self, before: list[float], after: list[float]) -> float:
        total_uj = 0.0
        for (_, wrap), start, end in zip(self.domains, before, after, strict=True):
            total_uj += end - start if end >= start else end + wrap - start  # the counter wrapped
        return total_uj / 1e6


class _GpuEnergy:
    """The job's GPUs through NVML: the energy counter where every device has one, else power x time."""

    def __init__(self, indices: list[int], nvml: Any | None) -> None:
        self.indices = indices
        self.handles: list[Any] = []
        self.source: Source = "none"
        self.reason = ""
        if not indices:
            self.reason = "the job has no GPU"
            return
        try:
            self.nvml = nvml if nvml is not None else _load_nvml()
            self.nvml.nvmlInit()
            self.handles = [self.nvml.nvmlDeviceGetHandleByIndex(index) for index in indices]
        except Exception as error:  # noqa: BLE001 - ImportError, NVMLError_LibraryNotFound, DriverNotLoaded
            self.reason = f"NVML is not usable ({error})"
            self.handles = []
            return
        try:
            for handle in self.handles:
                self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
            self.source = "nvml_counter"
        except Exception:  # noqa: BLE001 - NVMLError_NotSupported before Volta
            try:
                for handle in self.handles:
                    self.nvml.nvmlDeviceGetPowerUsage(handle)
                self.source = "nvml_power"
            except Exception as error:  # noqa: BLE001 - neither is supported
                self.reason = f"the GPUs report neither an energy counter nor power ({error})"

    def counter_mj(self) -> float:
        return float(sum(self.nvml.nvmlDeviceGetTotalEnergyConsumption(handle) for handle in self.handles))

    def power_w(self) -> float:
        return sum(self.nvml.nvmlDeviceGetPowerUsage(handle) for handle in self.handles) / 1000

    def close(self) -> None:
        if self.handles:
            with contextlib.suppress(Exception):
                self.nvml.nvmlShutdown()


class _PowerIntegral:
    """Power sampled on a thread, integrated by the trapezoid rule (nvml_power)."""

    def __init__(self, read_w: Any) -> None:
        self.read_w = read_w
        self.samples: list[tuple[float, float]] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="power-sampler", daemon=True)

    def _sample(self) -> None:
        self.samples.append((time.monotonic(), self.read_w()))

    def _run(self) -> None:
        while not self.stop.wait(POWER_SAMPLE_S):
            self._sample()

    def __enter__(self) -> _PowerIntegral:
        self._sample()
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join(timeout=5)
        self._sample()

    def joules(self) -> float:
        pairs = zip(self.samples, self.samples[1:], strict=False)
        return sum((t1 - t0) * (w0 + w1) / 2 for (t0, w0), (t1, w1) in pairs)


class EnergyMeter:
    """Measures intervals (`with meter.measure() as reading:`); sources are found once, at construction."""

    def __init__(self, gpu_indices: list[int], *, rapl_root: Path | None = None,
                 nvml: Any | None = None) -> None:
        """`rapl_root`: the powercap folder to read; None reads powercap_root()'s."""
        self.rapl = _RaplPackages(rapl_root if rapl_root is not None else powercap_root())
        self.gpu = _GpuEnergy(gpu_indices, nvml)

    @property
    def sources(self) -> list[Source]:
        found = ["rapl"] if self.rapl.domains else []
        return found + ([self.gpu.source] if self.gpu.source != "none" else [])

    def reasons(self) -> str:
        """Why each missing part is missing (CPU first, then GPU)."""
        missing = [self.rapl.reason if not self.rapl.domains else "",
                   self.gpu.reason if self.gpu.source == "none" else ""]
        return "; ".join(reason for reason in missing if reason)

    @contextlib.contextmanager
    def measure(self) -> Iterator[EnergyReading]:
        reading = EnergyReading(joules=None, source="none", reason=self.reasons())
        rapl_before = self.rapl.read_uj() if self.rapl.domains else []
        counter_before = self.gpu.counter_mj() if self.gpu.source == "nvml_counter" else 0.0
        power = _PowerIntegral(self.gpu.power_w) if self.gpu.source == "nvml_power" else None
        with power if power is not None else contextlib.nullcontext():
            yield reading
        if self.rapl.domains:
            reading.parts["rapl"] = self.rapl.joules(rapl_before, self.rapl.read_uj())
        if self.gpu.source == "nvml_counter":
            reading.parts["nvml_counter"] = (self.gpu.counter_mj() - counter_before) / 1000
        if power is not None:
            reading.parts["nvml_power"] = power.joules()
        if reading.parts:
            reading.joules = sum(reading.parts.values())
            reading.source = "+".join(reading.parts)

    def close(self) -> None:
        self.gpu.close()
