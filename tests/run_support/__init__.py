"""Test helpers for suite runs: a scratch project with suites, the CLI in a subprocess, the record."""
