"""TabM (Gorishniy et al., 2025), one of TabArena's strongest neural models: an MLP of 32 members
sharing most weights (BatchEnsemble), averaged; pytabkit's `TabM_D_*` defaults, trained from scratch
until 16 epochs without improvement on a fifth of the rows held out, its best epoch kept.

Its training loop takes no time limit: the epochs are capped by what the budget's time pays for,
measured first (tasks/frameworks/_pytabkit.py). Runs in an environment of its own (`tabm@1.7.3`).
"""

from __future__ import annotations

from tasks.frameworks._pytabkit import VERSION, PytabkitAdapter, environment
from tasks.frameworks._sampling import RowCap

NAME = "tabm"
# Measured at 50,000 rows x 17 columns, 1 core, on the loaded 2-core machine: a 1-epoch fit took 241 s
# (set-up 219 s, an epoch 22 s), and the adapter runs three fits (two probes, then the training). So a
# fit gets about this many cells (rows x columns) per core and minute of time_s, a few epochs then ...
# and its peak memory grew by 111 times the frame's size (torch's own, counted on a 6 MB frame).
ROW_CAP = RowCap(NAME, cells_per_core_minute=50_000, peak_memory_per_data=110)


class TabMAdapter(PytabkitAdapter):
    name = NAME
    install_hint = f"automl-eval frameworks install {NAME}@{VERSION} (a suite names it {NAME}@{VERSION})"
    environments = environment(NAME)
    classifier = "TabM_D_Classifier"
    regressor = "TabM_D_Regressor"
    own_epochs = 1_000_000_000  # pytabkit's default: early stopping ends it
    stops_early = True
    row_cap = ROW_CAP


ADAPTER = TabMAdapter()
