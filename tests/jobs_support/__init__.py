"""Test helpers for jobs, frameworks and metrics: a tiny project on disk, a misbehaving adapter."""
