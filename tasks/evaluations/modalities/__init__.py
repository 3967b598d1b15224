"""The project's modalities' evaluation entries (tasks/evaluations/by_modality.py): one module each."""
