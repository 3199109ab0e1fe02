"""A compaction of a base changes no cells, so it is no pending batch of a view over that base:
status, pending costs, SHOW STATUS and the maintenance pass agree, and the view still equals a
brute-force count after the next batch."""

from __future__ import annotations

import numpy as np

from arrayviews import L1, similarity


def _brute_counts(cells: set[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """count(*) of the L1 radius-1 self-join per cell, by enumerating every pair."""
    points = np.array(sorted(cells))
    distance = np.abs(points[:, None, :] - points[None, :, :]).sum(axis=2)
    return {tuple(int(c) for c in p): int(n) for p, n in zip(points, (distance <= 1).sum(axis=1), strict=True)}


def test_a_compaction_is_no_pending_batch_and_the_next_batch_is_one(db):
    """Before: after A.compact() the view said pending (1 batch, a predicted refresh cost from the
    compaction's rewritten files), and a refresh wrote a view version that changed nothing."""

    A = db.create_array("pend_a<v:int64>[i=0:39:8; j=0:39:8]")
    cells = {(1, 1), (1, 2), (9, 9)}
    A.insert({"i": [1, 1], "j": [1, 2], "v": [1, 2]})
    A.insert({"i": [9], "j": [9], "v": [3]})
    V = db.create_view("pend_v", similarity("pend_a", "pend_a", L1(1, 2), ["count(*) as cnt"]))
    A.compact()
    assert A.version == 3 and A.versions()["operation"].iloc[-1] == "compact"
    status = V.status()
    assert status["pending"] is False
    assert status["bases"] == [{"base": "pend_a", "reflected": 2, "current": 3, "pending_batches": 0}]
    costs = V.pending_costs().iloc[0]
    assert costs.pending_batches == 0 and costs.predicted_seconds == 0.0
    assert not db.sql("SHOW STATUS OF pend_v")["pending"].any()
    version = V.version
    db.maintain(refresh_all=True)
    assert db.view("pend_v").version == version  # nothing to bring forward
    A.insert({"i": [2, 10], "j": [1, 9], "v": [4, 5]})
    cells |= {(2, 1), (10, 9)}
    assert V.status()["bases"][0]["pending_batches"] == 1  # the insert, not the compaction too
    assert bool(db.sql("SHOW STATUS OF pend_v")["pending"].iloc[0])
    V.refresh()
    frame = db.view("pend_v").to_pandas()
    got = {(int(i), int(j)): int(n) for i, j, n in zip(frame["i"], frame["j"], frame["cnt"], strict=True)}
    assert got == _brute_counts(cells)
    assert V.status()["pending"] is False
