#!/usr/bin/env bash
# make team-up / make team-down: the team stack on this machine, bound to 127.0.0.1.
#   up:   Prefect server (its credential required), MLflow server (PostgreSQL backend, basic auth),
#         the process worker of the suite flows, long-lived team workers cpu-1 and cpu-2 (plus
#         gpu-1 where this host has GPUs); prints the two UI addresses.
#   down: stops them. State, logs and process ids live in .team/ (git-ignored).
# Ports: AUTOML_EVAL_PREFECT_PORT (4200), AUTOML_EVAL_MLFLOW_PORT (5050); PostgreSQL server:
# AUTOML_EVAL_PG_URL (postgresql://postgres@127.0.0.1:5432). Secrets come from the environment
# (PREFECT_SERVER_API_AUTH_STRING, MLFLOW_AUTH_ADMIN_PASSWORD, AUTOML_EVAL_WORKER_PASSWORD,
# MLFLOW_FLASK_SERVER_SECRET_KEY) or are generated once into .team/credentials.env (mode 600);
# none is ever printed.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=.venv/bin
case "${1:-}" in
  up)     exec "$BIN/automl-eval" team up ;;
  down)   exec "$BIN/automl-eval" team down ;;
  status) exec "$BIN/automl-eval" team status ;;
  *)      echo "usage: scripts/team.sh up|down|status" >&2; exit 2 ;;
esac
