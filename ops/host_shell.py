"""Run one command as a process of one cluster host: its own folders, its own hostname.

`python -m ops.host_shell --host NAME --root HOST_ROOT --hide CLUSTER_ROOT --project P [--keep DIR]
-- COMMAND...` is what ops/cluster.py puts after `ip netns exec NS unshare --mount --uts`: the
process is already in the host's network namespace and in a mount and UTS namespace of its own.
Here, before the command runs:

- the host's checkout copy (HOST_ROOT/checkout) is mounted at the project's path P, so the code, the
  specs, `datasets/`, `runs/` and `.team/` a host process reads and writes are that host's own, at
  the same path on every host (the installed package finds its modules there);
- HOME is HOST_ROOT/home (as STAGED_HOST/home: /root itself stays, it may hold the Python that
  the virtual environment links to) and HOST_ROOT/tmp is mounted at /tmp;
- the installed software under P (`--keep`: the virtual environments) is mounted read-only, as
  /usr would be on a real machine;
- the folder of every host (CLUSTER_ROOT) is covered by an empty one, so no host can read or write
  another's folders, whatever path it tries;
- the hostname becomes NAME (platform.node() names the host in heartbeats and MLflow tags).

Nothing here is a security boundary against root; it makes "no shared disk" true for the
processes the cluster starts, and a test checks it.
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
from pathlib import Path

# The host's own folder, reachable while the project's path is remounted over it.
STAGE = Path("/mnt")
STAGED_HOST = STAGE / "host"
HOME = STAGED_HOST / "home"


def _mount(*argv: str) -> None:
    subprocess.run(["mount", *argv], check=True)


def enter(host: str, root: Path, hide: Path, project: Path, keep: list[Path]) -> None:
    """Mount the host's folders over the shared paths and take its name (see the module's doc)."""
    _mount("--make-rprivate", "/")
    _mount("-t", "tmpfs", "-o", "mode=755,size=64m", "automl-eval-stage", str(STAGE))
    STAGED_HOST.mkdir()
    _mount("--bind", str(root), str(STAGED_HOST))
    staged_keep = []
    for index, folder in enumerate(keep):
        staged = STAGE / f"keep-{index}"
        staged.mkdir()
        _mount("--bind", str(folder), str(staged))
        _mount("-o", "remount,bind,ro", str(staged))
        staged_keep.append((staged, project / folder.relative_to(project)))
    _mount("-t", "tmpfs", "-o", "mode=755,size=1m", "automl-eval-hidden", str(hide))
    # /tmp before the project: a project under /tmp (a clone there) is then mounted over the host's
    # own /tmp, not hidden by it.
    _mount("--bind", str(STAGED_HOST / "tmp"), "/tmp")
    project.mkdir(parents=True, exist_ok=True)  # its mount point, where /tmp now holds nothing of it
    _mount("--bind", str(STAGED_HOST / "checkout"), str(project))
    for staged, target in staged_keep:
        target.mkdir(parents=True, exist_ok=True)  # the placeholder lies in the host's own checkout
        _mount("--bind", str(staged), str(target))
    socket.sethostname(host)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m ops.host_shell")
    parser.add_argument("--host", required=True)
    parser.add_argument("--root", required=True, type=Path)
    parser.add_argument("--hide", required=True, type=Path)
    parser.add_argument("--project", required=True, type=Path)
    parser.add_argument("--keep", action="append", default=[], type=Path)
    parser.add_argument("--cwd", type=Path)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no command to run")
    enter(args.host, args.root, args.hide, args.project, args.keep)
    os.chdir(args.cwd or args.project)
    os.environ["HOME"] = str(HOME)
    # The host's code first, whatever checkout the virtual environment's editable install names
    # (a venv shared by several checkouts would otherwise have every host run another's code).
    inherited = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(args.project), inherited]))
    os.execvp(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
