"""Energy with its source: a fake NVML that reports a known counter (or only power), RAPL files in a
folder laid out like /sys/class/powercap, and `none` with the reason on this machine; and real jobs
whose worker reads scripted RAPL counters (AUTOML_EVAL_POWERCAP_ROOT), or an empty folder."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from jobs_support.tiny_project import make_project

from tasks.energy import RAPL_ROOT, RAPL_ROOT_ENV, EnergyMeter
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


class ScriptedEnergyFile:
    """An energy_uj file whose k-th read gives `readings[k]`, however fast or slow the reads come.

    Each read is served through its own FIFO, and energy_uj is a symlink to the FIFO of the next
    read. Opening a FIFO for writing waits until a reader has opened it; only then is the link moved
    on to the next read's FIFO and the value written and closed (EOF). So read k+1, which starts
    after read k has its value, can only open FIFO k+1: no timing decides which value a read gets.
    After the last reading the link points at a plain file holding it: later reads see the counter
    stand still instead of blocking.
    """

    def __init__(self, domain: Path, readings: list[int]) -> None:
        self.domain, self.readings = domain, readings
        self.reads_served = 0
        self._stopping = False
        os.mkfifo(self._fifo(0))
        (domain / "energy_uj").symlink_to(self._fifo(0).name)
        self._thread = threading.Thread(target=self._serve, name=f"rapl-{domain.name}", daemon=True)
        self._thread.start()

    def _fifo(self, read: int) -> Path:
        return self.domain / f".energy_uj.read-{read}"

    def _point_at(self, target: Path) -> None:
        link = self.domain / ".energy_uj.next"
        link.symlink_to(target.name)
        link.replace(self.domain / "energy_uj")  # atomic: a reader sees the old link or the new one

    def _serve(self) -> None:
        for read, value in enumerate(self.readings):
            pipe = os.open(self._fifo(read), os.O_WRONLY)  # waits for read `read` to open it
            try:
                if self._stopping:
                    return
                if read + 1 < len(self.readings):
                    os.mkfifo(self._fifo(read + 1))
                    self._point_at(self._fifo(read + 1))
                else:
                    last = self.domain / ".energy_uj.last"
                    last.write_text(f"{value}\n")
                    self._point_at(last)
                os.write(pipe, f"{value}\n".encode())
                self.reads_served = read + 1
            finally:
                os.close(pipe)

    def stop(self) -> None:
        """Release the thread where it still waits for a read that never came."""
        self._stopping = True
        if self._thread.is_alive():
            waiting = os.open(self._fifo(self.reads_served), os.O_RDONLY | os.O_NONBLOCK)
            self._thread.join(timeout=5)
            os.close(waiting)


def _fake_powercap(root: Path, counters_uj: dict[str, list[int]], range_uj: int) -> list[ScriptedEnergyFile]:
    """A folder laid out like /sys/class/powercap: one package domain per entry of `counters_uj`."""
    files = []
    for package, readings in counters_uj.items():
        domain = root / package
        domain.mkdir(parents=True)
        (domain / "name").write_text(f"package-{package.rsplit(':', 1)[1]}\n")
        (domain / "max_energy_range_uj").write_text(f"{range_uj}\n")
        files.append(ScriptedEnergyFile(domain, readings))
    return files


def _energy_job(spec: Any) -> Job:
    return Job("energy", spec.name, "v0", "constant", None, 0, 0,
               Budget(name="e", time_s=5, cores=1, memory_mb=2000), {})


def test_a_job_records_its_rapl_energy_and_the_per_1k_figure_from_the_counters(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    # 61 rows in 2 folds: 31 test rows and 30 training rows, so dividing by the wrong part shows.
    spec = make_project(tmp_path / "project", rows=61)["binary"]
    # The worker reads each package's counter five times, in this order: once when its meter looks
    # for sources, then before and after the fit, then before and after predicting the test part.
    counters_uj = {
        "intel-rapl:0": [1_000_000, 1_000_000, 7_000_000, 7_000_000, 7_500_000],
        "intel-rapl:1": [40_000_000, 40_000_000, 41_500_000, 41_500_000, 41_750_000],
    }
    fit_j = sum(read[2] - read[1] for read in counters_uj.values()) / 1e6  # 6 + 1.5 J
    predict_j = sum(read[4] - read[3] for read in counters_uj.values()) / 1e6  # 0.5 + 0.25 J
    test_rows = 31
    powercap = tmp_path / "powercap"
    files = _fake_powercap(powercap, counters_uj, range_uj=262_143_328_850)
    monkeypatch.setenv(RAPL_ROOT_ENV, str(powercap))  # the worker inherits it
    job = _energy_job(spec)
    try:
        result = run_job(job, spec, tmp_path / "runs" / job.key)
    finally:
        for file in files:
            file.stop()

    assert result.status == "ok", result.error
    assert [file.reads_served for file in files] == [5, 5]
    assert result.costs["test_rows"] == test_rows and result.costs["train_rows"] == 30
    assert result.info["energy"]["source"] == "rapl"
    assert result.info["energy"]["fit_parts_j"] == pytest.approx({"rapl": fit_j})
    assert result.costs["energy_fit_j"] == pytest.approx(7.5) == pytest.approx(fit_j)
    # Joules per 1,000 predicted rows: the test part's joules over its rows.
    assert result.costs["energy_predict_per_1k_j"] == pytest.approx(predict_j / test_rows * 1000)
    assert result.costs["energy_predict_per_1k_j"] == pytest.approx(0.75 / 31 * 1000)


def test_a_job_records_its_energy_source_and_no_figure_without_one(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOML_EVAL_HOME", str(tmp_path / "project"))
    spec = make_project(tmp_path / "project", rows=60)["binary"]
    # An empty powercap folder: no source on any host, RAPL or not.
    monkeypatch.setenv(RAPL_ROOT_ENV, str(_no_rapl(tmp_path)))
    job = _energy_job(spec)
    result = run_job(job, spec, tmp_path / "runs" / job.key)
    assert result.status == "ok", result.error
    energy = result.info["energy"]
    assert energy["source"] == "none" and "no RAPL powercap domains under" in energy["reason"]
    assert str(_no_rapl(tmp_path)) in energy["reason"] and energy["fit_parts_j"] == {}
    assert "energy_fit_j" not in result.costs and "energy_predict_per_1k_j" not in result.costs
