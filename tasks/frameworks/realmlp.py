"""RealMLP (Holzmüller et al., 2024), one of TabArena's strongest neural models: an MLP with
robust scaling and smooth clipping of the numbers, periodic embeddings, tuned defaults (pytabkit's
`RealMLP_TD_*`), trained from scratch for 256 epochs on a learning-rate schedule over those epochs,
its best epoch on a fifth of the rows held out kept.

The budget's time sets the epochs (the schedule is then shorter, and complete) from a measured epoch,
and pytabkit's `time_to_fit_in_seconds` stops its Lightning loop if that was not enough
(tasks/frameworks/_pytabkit.py). Runs in an environment of its own (`realmlp@1.7.3`).
"""

from __future__ import annotations

from tasks.frameworks._pytabkit import VERSION, PytabkitAdapter, environment
from tasks.frameworks._sampling import RowCap

NAME = "realmlp"
# Measured at 50,000 rows x 17 columns, 1 core, on the loaded 2-core machine: a 1-epoch fit took 14.6 s
# (set-up 6.9 s, an epoch 7.7 s); three fits (two probes, then the training) of ten epochs or more take
# about this many cells (rows x columns) per core and minute of time_s; its peak memory grew by 37 times
# the frame's size (torch's own, counted on a 6 MB frame).
ROW_CAP = RowCap(NAME, cells_per_core_minute=500_000, peak_memory_per_data=40)


class RealMLPAdapter(PytabkitAdapter):
    name = NAME
    install_hint = f"automl-eval frameworks install {NAME}@{VERSION} (a suite names it {NAME}@{VERSION})"
    environments = environment(NAME)
    classifier = "RealMLP_TD_Classifier"
    regressor = "RealMLP_TD_Regressor"
    own_epochs = 256  # pytabkit's default
    honours_time_to_fit = True
    row_cap = ROW_CAP


ADAPTER = RealMLPAdapter()
