"""automl-eval: thin Prefect wiring and the command line."""
