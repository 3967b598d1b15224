"""Post-job evaluations: what is measured on a job's saved model after the job (see base.py)."""
