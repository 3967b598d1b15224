"""Energy with its source: a fake NVML that reports a known counter (or only power), RAPL files in a
folder laid out like /sys/class/powercap, and `none` with the reason on this machine."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from jobs_support.tiny_project import make_project

from tasks.energy import RAPL_ROOT, EnergyMeter
from tasks.jobs import run_job
from tasks.plan import Job
from tasks.specs import Budget


class NotSupported(Exception):
    """What pynvml raises for a query the device does not support."""


class FakeNvml:
    """NVML's calls the meter makes: each device's counter (mJ) advances by `mj_per_read` per read,
    or, without a counter, reports a constant power (mW)."""

    def __init__(self, *, counter: bool, mj_per_read: float = 0.0, power_mw: float = 0.0) -> None:
        self.counter, self.mj_per_read, self.power_mw = counter, mj_per_read, power_mw
        self.energy_mj: dict[int, float] = {}
        self.shut = False

    def nvmlInit(self) -> None: ...

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> float:
        if not self.counter:
            raise NotSupported("Not Supported")
        self.energy_mj[handle] = self.energy_mj.get(handle, 1_000_000.0) + self.mj_per_read
        return self.energy_mj[handle]

    def nvmlDeviceGetPowerUsage(self, handle: Any) -> float:
        return self.power_mw


def _no_rapl(tmp_path: Path) -> Path:
    return tmp_path / "no-powercap"


def test_the_nvml_counter_gives_joules_of_the_jobs_devices(tmp_path: Path) -> None:
    nvml = FakeNvml(counter=True, mj_per_read=2500.0)
    meter = EnergyMeter([0, 3], rapl_root=_no_rapl(tmp_path), nvml=nvml)
    assert meter.sources == ["nvml_counter"]
    with meter.measure() as reading:
        pass
    # Each of the two devices advanced 2500 mJ between the reads before and after (the probe at
    # construction is a read too, but it is before the interval).
    assert reading.source == "nvml_counter"
    assert reading.joules == pytest.approx(2 * 2.5)
    assert "RAPL" in reading.reason  # the CPU part is missing, and the reason says so
    meter.close()
    assert nvml.shut


def test_power_times_time_where_the_counter_is_missing(tmp_path: Path) -> None:
    meter = EnergyMeter([0], rapl_root=_no_rapl(tmp_path), nvml=FakeNvml(counter=False, power_mw=150_000))
    started = time.monotonic()
    with meter.measure() as reading:
        time.sleep(0.3)
    elapsed = time.monotonic() - started
    assert reading.source == "nvml_power"
    assert reading.joules == pytest.approx(150 * elapsed, rel=0.1)


def test_rapl_packages_are_read_and_a_wrapped_counter_is_counted(tmp_path: Path) -> None:
    root = tmp_path / "powercap"
    for package, start in (("intel-rapl:0", 999_000_000), ("intel-rapl:1", 5_000_000)):
        (root / package).mkdir(parents=True)
        (root / package / "name").write_text(f"package-{package[-1]}\n")
        (root / package / "energy_uj").write_text(f"{start}\n")
        (root / package / "max_energy_range_uj").write_text("1000000000\n")
    (root / "intel-rapl:0:0").mkdir()  # a core sub-domain: part of package 0, not counted again
    (root / "intel-rapl:0:0" / "energy_uj").write_text("123\n")
    meter = EnergyMeter([], rapl_root=root)
    assert meter.sources == ["rapl"]
    with meter.measure() as reading:
        (root / "intel-rapl:0" / "energy_uj").write_text("2000000\n")  # wrapped: +3 J
        (root / "intel-rapl:1" / "energy_uj").write_text("9000000\n")  # +4 J
    assert reading.source == "rapl" and reading.joules == pytest.approx(7.0)


def test_both_sources_add_up_and_say_so(tmp_path: Path) -> None:
    root = tmp_path / "powercap" / "intel-rapl:0"
    root.mkdir(parents=True)
    (root / "energy_uj").write_text("0\n")
    (root / "max_energy_range_uj").write_text("1000000000\n")
    meter = EnergyMeter([0], rapl_root=root.parent, nvml=FakeNvml(counter=True, mj_per_read=1000.0))
    with meter.measure() as reading:
        (root / "energy_uj").write_text("500000\n")
    assert reading.source == "rapl+nvml_counter"
    assert reading.parts == pytest.approx({"rapl": 0.5, "nvml_counter": 1.0})
    assert reading.joules == pytest.approx(1.5) and reading.reason == ""


def test_none_on_this_machine_with_the_reason(tmp_path: Path) -> None:
    # This VM exposes no RAPL files (checked here: a host that does would measure, not skip).
    if any(RAPL_ROOT.glob("intel-rapl:*/energy_uj")):
        pytest.skip("this host exposes RAPL: the none case is covered by the folder-based tests")
    meter = EnergyMeter([])
    with meter.measure() as reading:
        pass
    assert reading.joules is None and reading.source == "none"
    assert "RAPL" in reading.reason and "no GPU" in reading.reason


def test_a_job_records_its_energy_source_and_no_figure_without_one(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=60)["binary"]
    job = Job("energy", spec.name, "v0", "constant", None, 0, 0, Budget(name="e", time_s=5, cores=1,
                                                                         memory_mb=2000), {})
    result = run_job(job, spec, tmp_path / "runs" / job.key)
    assert result.status == "ok", result.error
    energy = result.info["energy"]
    if any(RAPL_ROOT.glob("intel-rapl:*/energy_uj")):
        assert energy["source"] == "rapl" or "RAPL" in energy["reason"]
    else:
        assert energy["source"] == "none" and "RAPL" in energy["reason"]
        assert "energy_fit_j" not in result.costs and "energy_predict_per_1k_j" not in result.costs
