"""Data: materialize packaged sources, load, split into saved folds, validate (Great Expectations)."""
