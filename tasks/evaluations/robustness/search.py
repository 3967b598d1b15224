"""Which cases to run, in what order, and what they add up to: curves, breaking points, coverage.

A *case* is one corrupted copy of the test fold scored through the saved model. Per corruption,
the frame-wide cases (every target it can hit, at one severity) draw the degradation curve: first
the preset severities, then bisection between the last preset that held and the first that broke,
until the bracket is within the resolution or the bisection budget is spent ("generate new cases
where the curve changes"). Single-target cases then exercise (target x corruption) cells, most
important target first, until the coverage minimum is met, every cell is done, or time runs out.
The search only orders work; running one case is the caller's `run_case`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

FRAME = "*"  # the target of a frame-wide case


BUILD_ERROR = "build error"  # Case.status of a corrupted copy that could not be made
CURVE_PHASES = ("preset", "bisect")  # the phases drawn several times (a coverage case is drawn once)


@dataclass
class Case:
    corruption: str
    family: str
    target: str  # FRAME, or the one column / stream it hits
    severity: float
    phase: str  # preset | bisect | coverage
    corruption_seed: int = 0  # the seed of this corrupted copy (case_seed)
    md5: str = ""  # of the corrupted test fold (CSV bytes): every framework sees the same rows
    cells_changed: int = 0
    # ok | failure (the model raised or returned garbage: scored as the constant predictor)
    # | build error (the corrupted copy itself could not be made: a defect here, not the model's)
    status: str = "ok"
    error: str = ""
    result: float = float("nan")
    degradation: float = float("nan")
    broken: bool = False
    wall_s: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)  # of the first draw
    # Several draws (other seeds, same severity) per case: result and degradation above are their
    # mean, `broken` is the mean's verdict; the draws give the band and the breaking interval.
    draws: int = 1
    degradation_low: float = float("nan")  # lowest and highest degradation over the draws: the band
    degradation_high: float = float("nan")
    degradation_std: float = float("nan")
    draw_broken: list[bool] = field(default_factory=list)  # per draw, in draw order

    def row(self) -> dict[str, Any]:
        data = asdict(self)
        scores = data.pop("scores")
        data["draw_broken"] = "".join("1" if b else "0" for b in self.draw_broken)
        return {**data, **{f"score_{name}": value for name, value in scores.items()}}


def degradation(clean: float, constant: float, result: float) -> float:
    """Relative drop of `result` from clean: 0 = unaffected, 1 = down to the constant predictor.

    Normalised by the clean-to-constant span so AUC, accuracy and -RMSE compare; a model no better
    than the constant predictor has no span, and its drop is taken relative to |clean| instead.
    """
    drop = clean - result
    if abs(drop) < 1e-12:
        return 0.0
    span = clean - constant
    return float(drop / span) if span > 1e-12 else float(drop / max(abs(clean), 1e-12))


def curve_auc(cases: list[Case]) -> float:
    """Area under retained performance (1 - degradation, clipped to [0, 1]) over severity, from
    (0, 1) to the highest severity tested, divided by that severity: 1 = never degrades."""
    points = sorted({c.severity: c for c in cases}.items())
    if not points:
        return float("nan")
    severities = np.array([0.0] + [s for s, _ in points])
    retained = np.array([1.0] + [1.0 - float(np.clip(c.degradation, 0.0, 1.0)) for _, c in points])
    return float(np.trapezoid(retained, severities) / severities[-1]) if severities[-1] > 0 else 1.0


@dataclass
class Curve:
    corruption: str
    family: str
    cases: list[Case] = field(default_factory=list)
    bisections: int = 0

    @property
    def scored(self) -> list[Case]:
        """The cases that were scored (a corrupted copy that could not be built is not a point)."""
        return [c for c in self.cases if c.status != BUILD_ERROR]

    def complete(self, presets: list[float]) -> bool:
        """Whether every preset severity was scored (a curve cut short by the time limit is not)."""
        return {c.severity for c in self.scored} >= set(presets)

    @property
    def auc(self) -> float:
        return curve_auc(self.scored)

    def bracket(self) -> tuple[float, float] | None:
        """(last severity that held, first that broke) below the first break, or None."""
        ordered = sorted(self.scored, key=lambda c: c.severity)
        first_broken = next((c.severity for c in ordered if c.broken), None)
        if first_broken is None:
            return None
        held = [c.severity for c in ordered if not c.broken and c.severity < first_broken]
        return (max(held) if held else 0.0), first_broken

    @property
    def breaking_point(self) -> float | None:
        bracket = self.bracket()
        return bracket[1] if bracket else None

    def breaking_interval(self) -> tuple[float, float] | None:
        """(lowest, highest) over the draws of each draw's own breaking severity (1.0 for a draw
        that held everywhere), or None when no draw broke: how far one random draw could have put
        the breaking point. Draw k of every case shares its seeds' draw index, so it is one curve."""
        ordered = sorted(self.scored, key=lambda c: c.severity)
        draws = min((len(c.draw_broken) for c in ordered), default=0)
        if not draws:
            return None
        points = [next((c.severity for c in ordered if c.draw_broken[k]), 1.0) for k in range(draws)]
        if not any(c.draw_broken[k] for c in ordered for k in range(draws)):
            return None
        return min(points), max(points)


@dataclass
class SearchSettings:
    presets: list[float]
    resolution: float
    max_bisections: int
    coverage_min: float
    probe_severity: float  # severity of a coverage case when the corruption never broke


@dataclass
class SearchOutcome:
    curves: dict[str, Curve]
    cell_cases: list[Case]
    cells_total: int
    cells_exercised: int
    stop_reason: str
    finished_presets: bool

    @property
    def coverage(self) -> float:
        return self.cells_exercised / self.cells_total if self.cells_total else 1.0

    def all_cases(self) -> list[Case]:
        return [c for curve in self.curves.values() for c in curve.cases] + self.cell_cases


class OutOfTime(Exception):
    pass


def search(
    corruptions: dict[str, tuple[str, list[str]]],  # name -> (family, targets, most important first)
    run_case: Callable[[str, str, float, str], Case],  # (corruption, target, severity, phase) -> Case
    settings: SearchSettings,
    has_time: Callable[[], bool],
) -> SearchOutcome:
    """Each corruption's curve (presets, then bisection), then coverage cells, while `has_time()`."""
    curves = {name: Curve(name, family) for name, (family, _) in corruptions.items()}
    # A corruption with one target: its frame-wide case is also that cell's case.
    cells = [(name, target) for name, (_, targets) in corruptions.items() for target in targets]
    exercised: set[tuple[str, str]] = set()
    cell_cases: list[Case] = []
    finished_presets = False

    def run(name: str, target: str, severity: float, phase: str) -> Case:
        if not has_time():
            raise OutOfTime
        case = run_case(name, target, severity, phase)
        targets = corruptions[name][1]
        if target != FRAME:
            exercised.add((name, target))
        elif len(targets) == 1:
            exercised.add((name, targets[0]))
        return case

    def coverage() -> float:
        return len(exercised) / len(cells) if cells else 1.0

    try:
        # One curve after another, each finished (presets, then bisection) before the next starts:
        # a time limit leaves whole curves undone rather than every curve cut short.
        for curve in curves.values():
            for severity in sorted(set(settings.presets)):
                curve.cases.append(run(curve.corruption, FRAME, severity, "preset"))
            while curve.bisections < settings.max_bisections:
                bracket = curve.bracket()
                if bracket is None or bracket[1] - bracket[0] <= settings.resolution:
                    break
                middle = round((bracket[0] + bracket[1]) / 2, 6)
                curve.cases.append(run(curve.corruption, FRAME, middle, "bisect"))
                curve.bisections += 1
        finished_presets = True
        # Coverage: most important targets first, one corruption after another at each rank.
        ranked = sorted(cells, key=lambda cell: (corruptions[cell[0]][1].index(cell[1]), cell[0]))
        for name, target in ranked:
            if coverage() >= settings.coverage_min:
                break
            if (name, target) in exercised:
                continue
            breaking = curves[name].breaking_point
            severity = breaking if breaking is not None else settings.probe_severity
            cell_cases.append(run(name, target, severity, "coverage"))
        if coverage() >= settings.coverage_min:
            stop = f"coverage {coverage():.0%} reached the minimum {settings.coverage_min:.0%}"
        else:
            stop = f"every cell exercised (coverage {coverage():.0%})"
    except OutOfTime:
        where = "coverage cases" if finished_presets else "degradation curves"
        stop = f"time limit reached during the {where} (coverage {coverage():.0%})"
    return SearchOutcome(curves, cell_cases, len(cells), len(exercised), stop, finished_presets)
