"""The record in MLflow: the only package that imports mlflow.

store: where runs go (embedded SQLite by default, MLFLOW_TRACKING_URI overrides);
execution: experiment per suite, parent run per execution (start, resume, finish, offline);
job_run: a child run per job, logged from its job folder (tags, metrics, artifacts, pyfunc model);
job_folder: each job folder's `tracking.json`, from pending to logged;
recorded: what the store holds of an execution's jobs (what a resume skips);
breaker: recording that never holds a suite back while the store is away;
system_metrics: MLflow's host sampling on the parent run;
pyfunc: the one MLflow pyfunc wrapper around every framework adapter's saved model;
read: runs back into DataFrames for reports.
Nothing is imported here, so importing a submodule pulls in only what it needs.
"""
