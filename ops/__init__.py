"""Operations: starting, stopping and inspecting the servers and workers a team runs on.

Nothing here is a Prefect flow; the flows (flows/) and the CLI (flows/cli_team.py) call into it.
"""
