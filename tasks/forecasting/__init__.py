"""The forecasting track: its card block, folds (rolling origins), gate checks and the baselines."""
