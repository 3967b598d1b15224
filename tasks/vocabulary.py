"""One vocabulary of MLflow names, the same for every framework, team and mode.

tracking/ writes with these names and report/ reads with them; the vocabulary page
(docs/reference/vocabulary.md) is generated from (and tested against) this module. Change a name
here and nowhere else; the scores' names come from the metric registry (tasks/metric_registry.py),
one entry per metric.
"""

from __future__ import annotations

from tasks.metric_registry import RESULT as RESULT  # the suite metric made higher-is-better
from tasks.metric_registry import lower_is_better, score_metrics

# Scores: every metric for the problem type, computed by the harness; each is one entry of the
# metric registry (tasks/metric_registry.py), which says how it is computed and which way is better.
SCORE_METRICS: dict[str, tuple[str, ...]] = score_metrics()
LOWER_IS_BETTER: frozenset[str] = lower_is_better()

# Figures of the training itself that a model reports (FittedModel.training_costs): the image CNN's.
TRAINING_COSTS: dict[str, str] = {
    "epochs": "passes over the training images completed within the budget (fractional)",
    "train_images_per_s": "training images per second, over the whole fit",
    "time_per_epoch_s": "seconds per pass over the training images",
    "data_wait_share": "share of the training time spent waiting for the DataLoader's next batch",
    "torch_gpu_reserved_peak_mb": "peak GPU memory PyTorch reserved inside the job "
                                  "(torch.cuda.max_memory_reserved; GPU jobs only)",
    "pretrained_parameters": "parameters the network started from pretrained weights with (transfer "
                             "learning, e.g. the MobileNetV2 fine-tune's ImageNet features); 0: trained "
                             "from scratch",
}

# Timings, model and resource figures of one job (MLflow metrics).
COST_METRICS: dict[str, str] = {
    "fit_s": "seconds in the framework's fit",
    "predict_s": "seconds to predict the whole test fold",
    "latency_p50_ms": "median single-row in-process predict latency (up to 100 calls or 3 s)",
    "latency_p99_ms": "99th percentile single-row in-process predict latency",
    "latency_calls": "single-row predict calls the in-process latency was measured on",
    "throughput_rows_s": "batch predict throughput, rows per second",
    "model_size_mb": "size of the saved model folder on disk",
    "models_count": "models the framework trained (leaderboard length)",
    "duration_s": "job wall time in the harness, worker launch to scored result",
    "overhead_s": "duration_s minus fit, predict and latency measurement (the harness's share)",
    "peak_rss_mb": "peak resident memory of the job's process tree (JVM included), measured alike in every "
                   "mode (the worker's own high-water mark, not the one Linux carries over from its parent)",
    "cpu_s": "CPU seconds of the job's process tree",
    "gpu_util_mean_pct": "mean GPU utilisation of the job's devices (GPU hosts only)",
    "gpu_util_peak_pct": "peak GPU utilisation of the job's devices (GPU hosts only)",
    "gpu_mem_peak_mb": "peak GPU memory of the job itself: NVML's per-process usage summed over the "
                       "job's process tree (loader workers included), so other jobs on a shared device do "
                       "not count (GPU hosts only; absent where NVML attributes no memory to the job's "
                       "processes)",
    "gpu_device_used_mem_peak_mb": "peak of the device-wide \"used\" memory of the job's devices, every "
                                   "process on them counted (GPU hosts only): beside gpu_mem_peak_mb, not "
                                   "the job's own figure",
    "gpu_s": "GPU-seconds: the job's wall seconds times the GPUs it held (GPU jobs only)",
    "train_rows": "rows in the training part of the fold",
    "test_rows": "rows in the test part of the fold",
    "fit_rows": "training rows the framework was fitted on: train_rows, or fewer where it fitted a sample "
                "to stay within the budget (autogluon on data too large for its time or memory)",
    "data_load_s": "seconds the worker took to read and type the fold's data",
    "energy_fit_j": "joules of the fit, read from the source in info.energy.source (nvml_counter, "
                    "nvml_power, rapl; absent where none is readable, never estimated)",
    "energy_predict_per_1k_j": "joules per 1,000 test-fold predictions (the batch predict), same source",
    "anytime_t95_s": "fit seconds until the anytime curve had gained 95% of what the whole fit gained over "
                     "its first model (frameworks that record their search's progress)",
    "anytime_t99_s": "fit seconds until the anytime curve had gained 99% of the whole fit's gain",
    "anytime_points": "points of the job's anytime curve (anytime.csv)",
    "data_load_rss_mb": "the worker's peak memory once the fold is loaded (the harness's share, on top of "
    "memory_mb)",
    **TRAINING_COSTS,
}

# Step metrics of a job run: its time series, whole in the run's artifacts resources.csv and
# training_curve.csv. The watchdog's samples have step = milliseconds since the worker's launch
# (at most SERIES_STEPS points); a training curve has the framework's training step.
SERIES_METRICS: dict[str, str] = {
    "series_rss_mb": "RSS of the job's process tree at each watchdog sample, MB",
    "series_cpu_pct": "CPU of the job's process tree at each watchdog sample, % of one core",
    "series_gpu_util_pct": "GPU utilisation of the job's devices at each sample (GPU hosts only)",
    "series_gpu_mem_mb": "GPU memory of the job's own processes at each sample, NVML per process "
                         "(GPU hosts only)",
    "validation_loss": "validation loss at each evaluation during training (frameworks that record it)",
    "anytime_result": "the job's result (test fold) had its fit stopped at step = milliseconds of fit time: "
                      "the framework's best model by its validation score then (anytime.csv)",
    # The image CNN's per-epoch series (tasks/frameworks/cnn.py): step = the epoch; its columns
    # images_per_s and data_wait_share are named series_* here (the job's totals are cost metrics).
    "train_loss": "mean training loss over each epoch (the image CNN)",
    "series_images_per_s": "training images per second in each epoch (the image CNN)",
    "series_data_wait_share": "share of each epoch spent waiting for the DataLoader's next batch "
                              "(the image CNN)",
}
SERIES_STEPS = 100

# Alignment figures of a multimodal dataset (tasks/align.py AlignmentReport.metrics), MLflow metrics
# on each job run of that dataset or of one of its modality combinations. STREAM is a stream of the
# card (e.g. align_gyro_offset_ms).
ALIGNMENT_METRICS: dict[str, str] = {
    "align_passed": "1 if the streams aligned within tolerance (the gate passed), else 0",
    "align_tolerance_ms": "residual clock skew the gate allows, ms",
    "align_residual_max_ms": "largest residual skew left after offset correction, any stream, ms",
    "align_grid_rows": "rows of the common time grid",
    "align_aligned_rows": "grid rows every stream has a sample for",
    "align_windows_kept": "windows in the table (rows the frameworks see)",
    "align_windows_dropped": "windows dropped (too few aligned rows or no clear label)",
    "align_STREAM_offset_ms": "clock offset estimated for the stream and subtracted, ms",
    "align_STREAM_residual_mean_ms": "mean residual skew of the stream after correction, ms",
    "align_STREAM_residual_max_ms": "largest residual skew of the stream after correction, ms",
    "align_STREAM_coverage": "share of the common grid the stream has a sample for",
    "align_STREAM_dropped_share": "share of the stream's raw samples that reach no aligned row",
    "align_STREAM_correlation": "strength of the shared-signal match behind the offset estimate",
    "align_STREAM_duplicates_dropped": "samples dropped for repeating a timestamp",
    "align_STREAM_missing_samples": "samples missing from the stream, implied by gaps in its clock",
    "align_STREAM_unmatched_grid_rows": "grid rows with no sample of the stream within the join tolerance",
}

# Post-job evaluations (tasks/evaluations/): each one declares the metric names it records (its
# `metrics`, NAME -> meaning; an upper-case part such as `cN` in `serve_cN_p99_ms` stands for a value).
# They are listed through the registry, so adding an evaluation touches its own folder only.
EVALUATION_TAGS: dict[str, str] = {
    "evaluation.NAME": "outcome of the post-job evaluation NAME: ok | partial | failed | timeout | memory | "
                       "not applicable (never the job's own status)",
    "evaluation.NAME.reason": "why the evaluation NAME is not ok, with the last lines of its error or log",
}
EVALUATION_COMMON_METRICS: dict[str, str] = {
    "eval_NAME_s": "wall time of the post-job evaluation NAME, seconds (its own limit, not the search "
                   "budget)",
}


def evaluation_wall_metric(name: str) -> str:
    return f"eval_{name}_s"


def name_pattern(name: str) -> str:
    """A regular expression for a vocabulary name whose upper-case parts stand for values."""
    import re

    return "^" + "".join("[A-Za-z0-9_.-]+" if part.isupper() else re.escape(part)
                         for part in re.split(r"([A-Z][A-Z0-9]*)", name) if part) + "$"


# Tags on every job run (child run). Values are strings.
JOB_TAGS: dict[str, str] = {
    "suite": "suite name",
    "execution_id": "the suite execution (parent run id) this job belongs to",
    "job_key": "stable hash of dataset@version, framework@variant+params, fold, seed, budget, suite",
    "status": "ok | failed | timeout | memory | skipped",
    "framework": "framework id as the suite names it (name or name:variant)",
    "framework_name": "adapter name without variant",
    "framework_version": "installed version of the framework",
    "dataset": "dataset name (card)",
    "data_version": "DVC md5 of the dataset's file",
    "problem_type": "binary | multiclass | regression | forecasting",
    "metric": "the suite metric that `result` is made from",
    "budget": "budget name",
    "fold": "outer fold index",
    "seed": "random seed",
    "git_sha": "commit of the automl-eval checkout",
    "app_version": "automl-eval version",
    "host": "host name of the worker",
    "cpu_model": "CPU model of the worker",
    "gpu_model": "GPU model of the job's devices, or 'none'",
    "team": "team tag given at run time",
    "error": "last lines of the error, for failed jobs",
    "energy_source": "where energy_fit_j came from: nvml_counter, nvml_power, rapl (joined by + when "
                     "several), or none",
    "energy_reason": "why an energy source is missing (no RAPL files, no GPU, NVML unusable)",
    "anytime_reason": "why the job has no anytime curve: what its framework's model says it does not "
                      "expose, or the candidate that could not be scored",
    # Jobs of a suite's `scaling:` block only (docs/suites.md#scaling).
    "scaling_work": "fixed (the framework's params fix its work: the Scaling section compares fit_s), "
                    "cut_short (fixed work the budget's time stopped: fit_s not comparable) or fills_time "
                    "(it searches until its time is spent: the Scaling section compares result)",
    "scaling_capped": "the scaling steps above the planning host's cores or GPUs, and what they were "
                      "capped at",
}
SCALING_JOB_TAGS = frozenset({"scaling_work", "scaling_capped"})  # on the jobs of a scaling block only
STATUSES = ("ok", "failed", "timeout", "memory", "skipped")
FINISHED_STATUSES = frozenset({"ok", "skipped"})  # a resumed suite does not run these again
RETRYABLE_STATUSES = frozenset({"failed", "timeout", "memory"})

# Params on every job run. Framework params keep their suite names behind the `param.` prefix.
JOB_PARAMS: dict[str, str] = {
    "fold": "outer fold index",
    "seed": "random seed",
    "budget_time_s": "the framework's search time in seconds",
    "budget_cores": "CPU cores granted",
    "budget_memory_mb": "process-tree memory limit",
    "budget_gpus": "GPUs granted",
    "scaling_cores": "the cores of the suite's scaling step this job ran at (scaling jobs only)",
    "scaling_gpus": "the GPUs of the suite's scaling step this job ran at (scaling jobs only)",
    "param.<name>": "each framework param as the suite gives it (`_name` ones are for the adapter)",
}

# Tags on the parent run of one suite execution (its job runs are its children).
EXECUTION_TAGS: dict[str, str] = {
    "suite": "suite name",
    "execution_state": "running | finished (an unfinished execution is resumed by the next run)",
    "budget": "budget name",
    "team": "team tag given at run time",
    "trigger": "what started the execution: cli, manual or nightly (nightlies compare with nightlies)",
    "git_sha": "commit of the automl-eval checkout",
    "app_version": "automl-eval version",
    "host": "host that ran the flow",
    "data_gate_failures": "datasets whose data gate failed, with the reason (their jobs are skipped)",
    "data_gate_accepted": "failed gate checks the dataset's card accepts (`gate: allow`), with the reason",
    "best.DATASET": "the framework with the best mean `result` on DATASET in this execution",
    # Set by `automl-eval explain-regression` (docs/attribution.md), on a regressed execution and
    # on each mix it ran (suite SUITE-attribution).
    "attribution_main_factor": "the measured culprit of this execution's regression and its share",
    "attribution_of": "on a mix of an attribution: the regressed execution it explains",
    "attribution_mix": "on a mix of an attribution: the factors at their new value (+data_version)",
    "attribution_install_s": "on a mix of an attribution: seconds pip took to install the framework "
                             "versions it needed first",
    "attribution_code": "on a mix of an attribution where the project commit is a factor: the commit "
                        "whose adapters its jobs ran (from a git worktree)",
}

# Metrics on the parent run of one suite execution, set when it finishes.
EXECUTION_METRICS: dict[str, str] = {
    "jobs": "jobs recorded in the execution",
    "jobs_ok": "jobs that finished with a result",
    "jobs_failed": "jobs that failed, timed out or ran out of memory",
    "jobs_skipped": "jobs skipped (no GPU, data gate failed, problem type not handled)",
}
