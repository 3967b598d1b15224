"""Recording that never holds a suite back: a circuit breaker per suite execution.

While the store answers, each finished job is logged at once. The first time logging fails because
the store cannot be reached (past the bounded HTTP retries of `store.HTTP_SETTINGS`), the breaker of
that execution opens: that job and every later one go straight to their job folders, `tracking.json`
saying why, and a background thread probes the store every `PROBE_EVERY_S` seconds. When the store
answers again, the waiting results are logged in the order their jobs finished, and the breaker
closes. `settle` at the end of a run gives the store one last chance and says what still waits.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from pathlib import Path

from tasks.tracking import store
from tasks.tracking.job_folder import folder_execution, mark_waiting
from tasks.tracking.job_run import log_job_dir

PROBE_EVERY_S = 5.0
logger = logging.getLogger("automl_eval.tracking")


@dataclass(frozen=True)
class Waiting:
    """Results of an execution that are on disk only, and why."""

    count: int
    reason: str


def is_unreachable(exc: BaseException) -> bool:
    """Whether a failure says the store cannot be reached now (rather than this record being wrong)."""
    text = str(exc)
    markers = ("API request to", "Max retries exceeded", "Connection refused", "database is locked",
               "timed out", "Temporary failure", "Name or service not known")
    connection_types = ("ConnectionError", "Timeout", "OperationalError", "MaxRetryError")
    return (isinstance(exc, OSError) or type(exc).__name__ in connection_types
            or any(marker in text for marker in markers))


def describe(exc: BaseException) -> str:
    """One line for a person: which store, and what it answered."""
    where = store.tracking_uri() if store.is_server() else "the MLflow store"
    first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if "Connection refused" in str(exc) or "Max retries exceeded" in str(exc):
        return f"tracking server {where} unreachable"
    return f"{where}: {first_line[:200]}"


class ExecutionBreaker:
    """The breaker of one execution: closed (log now) or open (wait on disk, probe in the background)."""

    def __init__(self, execution_id: str, experiment_id: str, probe_every_s: float = PROBE_EVERY_S) -> None:
        self.execution_id = execution_id
        self.experiment_id = experiment_id
        self.probe_every_s = probe_every_s
        self.reason = ""  # non-empty while open
        self._last_reason = ""  # why the latest result went to disk
        self._waiting: list[Path] = []  # in the order their jobs finished
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._prober: threading.Thread | None = None

    @property
    def is_open(self) -> bool:
        return bool(self.reason)

    def waiting(self) -> Waiting:
        with self._lock:
            return Waiting(len(self._waiting), self.reason or self._last_reason)

    def record(self, job_dir: Path) -> str | None:
        """Log one finished job folder now, or leave it waiting on disk; its run id, or None."""
        with self._lock:
            if self.reason:
                self._wait(job_dir, self.reason)
                return None
        try:
            return log_job_dir(job_dir).run_id
        except Exception as exc:
            reason = describe(exc)
            with self._lock:
                if is_unreachable(exc):
                    self._open(reason)
                self._wait(job_dir, reason)
            logger.debug("record of %s waits on disk: %s", job_dir.name, exc)
            return None

    def _wait(self, job_dir: Path, reason: str) -> None:
        mark_waiting(job_dir, reason)
        self._last_reason = reason
        if job_dir not in self._waiting:
            self._waiting.append(job_dir)

    def _open(self, reason: str) -> None:
        if self.reason:
            return
        self.reason = reason
        logger.warning("%s: job results wait on disk from now on; they are logged when it answers "
                       "(or by `automl-eval sync`).", reason)
        self._stop.clear()
        self._prober = threading.Thread(target=self._probe_loop, name="tracking-probe", daemon=True)
        self._prober.start()

    def _probe_loop(self) -> None:
        while not self._stop.wait(self.probe_every_s):
            if self._try_drain():
                return

    def _probe(self) -> bool:
        try:
            store.client().search_experiments(max_results=1)
            return True
        except Exception:
            return False

    def _try_drain(self) -> bool:
        """If the store answers, log what waits, in order; True once nothing waits and it is closed."""
        if not self._probe():
            return False
        while True:
            with self._lock:
                if not self._waiting:
                    self.reason = ""
                    return True
                job_dir = self._waiting[0]
            try:
                log_job_dir(job_dir)
            except Exception as exc:
                with self._lock:
                    self.reason = describe(exc)
                mark_waiting(job_dir, self.reason)
                return False
            with self._lock:
                self._waiting.pop(0)

    def settle(self) -> Waiting:
        """At the end of a run: stop probing, try the store once more if it was away, say what waits."""
        self._stop.set()
        if self._prober is not None:
            self._prober.join(timeout=60)
        if self.is_open:
            self._try_drain()
        return self.waiting()


_breakers: dict[str, ExecutionBreaker] = {}
_breakers_lock = threading.Lock()


def breaker_for(execution_id: str, experiment_id: str) -> ExecutionBreaker:
    with _breakers_lock:
        if execution_id not in _breakers:
            _breakers[execution_id] = ExecutionBreaker(execution_id, experiment_id)
        return _breakers[execution_id]


def record(job_dir: Path) -> str | None:
    """Record a finished job folder through its execution's breaker; the run id, or None if it waits."""
    execution = folder_execution(job_dir)
    return breaker_for(execution.execution_id, execution.experiment_id).record(job_dir)


def open_from_start(execution_id: str, reason: str) -> None:
    """An execution started while the store was unreachable: its results wait from the first one."""
    breaker = breaker_for(execution_id, "")
    with breaker._lock:
        breaker._open(reason)


def is_open(execution_id: str) -> bool:
    breaker = _breakers.get(execution_id)
    return breaker is not None and breaker.is_open


def waiting_now() -> Waiting:
    """Across this process's executions (what the progress bar shows)."""
    parts = [breaker.waiting() for breaker in list(_breakers.values())]
    count = sum(part.count for part in parts)
    return Waiting(count, next((part.reason for part in parts if part.count), ""))


def settle(execution_id: str) -> Waiting:
    breaker = _breakers.get(execution_id)
    return breaker.settle() if breaker is not None else Waiting(0, "")
