"""LoadGen's steps against its query minimum: a low rate's step is lengthened past max_duration_s,
and a rate whose minimum does not fit in the time left is named with the reason, never judged 0 QPS."""

from __future__ import annotations

import time

from tasks.evaluations._loadgen_search import search, step_cap_s

PLAN = {"min_query_count": 500, "min_duration_s": 2.0, "max_duration_s": 20.0, "drain_s": 2.0,
        "search_steps": 4, "target_qps": [], "high_qps": 0.0}


def test_a_low_rate_gets_a_step_long_enough_for_its_minimum_of_queries() -> None:
    assert step_cap_s(PLAN, 100.0) == 20.0  # 500 queries in about 5 s: the cap stands
    # 500 queries at 10 QPS take about 50 s: a 20 s cap would end the step early whatever the model.
    assert step_cap_s(PLAN, 10.0) > 500 / 10


def test_a_rate_whose_minimum_does_not_fit_in_the_time_left_is_named_not_judged_zero() -> None:
    for plan in (PLAN | {"target_qps": [5.0]}, PLAN | {"high_qps": 5.0}):
        found = search(plan, [b"{}"], deadline=time.monotonic() + 40)
        assert found["steps"] == [] and found["max_valid_qps"] is None
        assert found["unjudged"].startswith("LoadGen could not judge 5 QPS: its min_query_count of 500 "
                                            "queries takes about 1")
        assert "left of serving.time_s; raise serving.time_s" in found["unjudged"]
        assert found["stopped_early"] == ""
