"""The record in MLflow: the only package that imports mlflow.

store: where runs go (embedded SQLite by default, MLFLOW_TRACKING_URI overrides);
log: experiment per suite, parent run per execution, child run per job;
pyfunc: the one MLflow pyfunc wrapper around every framework adapter's saved model;
read: runs back into DataFrames for reports.
Nothing is imported here, so importing a submodule pulls in only what it needs.
"""
