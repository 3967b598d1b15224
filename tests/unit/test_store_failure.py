"""A job whose parameters or result the team's object store did not take is named as the store's
failure in one sentence (flows/team_dispatch.py), not as the job's own."""

from __future__ import annotations

from botocore.exceptions import ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError
from prefect.settings import PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK, temporary_settings

from flows.team_dispatch import is_store_failure, store_failure

STORE = "https://10.213.7.10:8333/automl-eval-results/prefect/1234"
BLOCK = "remote-file-system/automl-eval-results"


def test_an_unanswered_store_is_named_by_its_block_and_other_failures_are_not() -> None:
    unanswered = [ReadTimeoutError(endpoint_url=STORE), ConnectTimeoutError(endpoint_url=STORE),
                  EndpointConnectionError(endpoint_url=STORE)]
    with temporary_settings({PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK: BLOCK}):
        for error in unanswered:
            assert is_store_failure(error)
            # As a failed task run's message says it, after Prefect's own words.
            assert is_store_failure(f"Task run encountered an exception {type(error).__name__}: {error}")
            sentence = store_failure(error, "take the job's result")
            assert sentence.startswith(f"the team's object store (Prefect block {BLOCK}) did not take the "
                                       "job's result")
            assert STORE in sentence and "\n" not in sentence
        assert not is_store_failure(ValueError("the model refused its data"))
    with temporary_settings({PREFECT_RESULTS_DEFAULT_STORAGE_BLOCK: None}):  # one host: no store
        assert not is_store_failure(unanswered[0])
