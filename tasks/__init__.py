"""automl-eval: the work. Each module is one step of the data flow in docs/design.md."""
