"""Maintenance passes (``db.maintain()``, ``arrayviews maintain``): stream views brought up to date,
array views under a refresh limit decided on, other stale array views refreshed with ``--all``, a
failing view reported while the others are maintained, two passes at once on one warehouse. Views
are checked against plain-Python brute force and a pandas recomputation of the stream view."""

from __future__ import annotations

import numpy as np
import pandas as pd
from click.testing import CliRunner

import arrayviews
from arrayviews.cli.main import Context, cli
from processes import fork

RECENT = """CREATE VIEW Recent AS
INITIALIZE Recent[i] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[i-2 .. i] GROUP BY src
UPDATE Recent[j] AS SELECT src, sum(loss) AS total, count(*) AS n FROM M[j-2 .. j] GROUP BY src
PARTITION LENGTH 60"""
EPOCH = 1_420_070_400
BIG = 2**62


def _cells(seed: int, n: int, low: int = -1000, high: int = 1000) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    flat = rng.choice(24 * 24, size=n, replace=False)
    return pd.DataFrame({"i": flat // 24, "j": flat % 24, "v": rng.integers(low, high, size=n)})


def _neighbour_sums(cells: pd.DataFrame) -> dict[tuple[int, int], tuple[int, int]]:
    """Per cell: (count, sum of v) over the cells within L1 distance 1, by plain Python integers."""
    values = {(int(i), int(j)): int(v) for i, j, v in zip(cells.i, cells.j, cells.v, strict=True)}
    out = {}
    for i, j in values:
        found = [values[c] for c in ((i, j), (i - 1, j), (i + 1, j), (i, j - 1), (i, j + 1)) if c in values]
        out[(i, j)] = (len(found), sum(found))
    return out


def _view_sums(view) -> dict[tuple[int, int], tuple[int, int]]:
    frame = view.to_pandas()
    return {
        (int(i), int(j)): (int(n), int(s))
        for i, j, n, s in zip(frame.i, frame.j, frame.n, frame.s, strict=True)
    }


def _readings(minute: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "ts": pd.to_datetime([EPOCH + 60 * minute + 5 * k for k in range(4)], unit="s", utc=True),
            "src": [f"s{k % 2}" for k in range(4)],
            "loss": [minute * 10 + k for k in range(4)],
        }
    )


def _stream_view_matches_pandas(db) -> None:
    rows = db.stream("M").read().toPandas()
    times = pd.to_datetime(rows["ts"])
    times = times.dt.tz_localize("UTC") if times.dt.tz is None else times.dt.tz_convert("UTC")
    rows = rows.assign(part=(times - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(minutes=1))
    recent = db.stream_view("Recent").to_pandas()
    for part in range(int(rows.part.min()), int(rows.part.max()) + 1):
        window = rows[(rows.part > part - 3) & (rows.part <= part)]
        expected = sorted((src, int(g.loss.sum()), len(g)) for src, g in window.groupby("src"))
        mine = recent[pd.to_datetime(recent["PART_TIMESTAMP"]) == pd.Timestamp(part * 60, unit="s")]
        assert sorted(zip(mine.src, mine.total.astype(int), mine.n.astype(int), strict=True)) == expected


def _warehouse(db):
    """An array view without a limit (V over A), one with a generous limit (L over B), a stream view."""
    db.create_array("A<v:int64>[i=0:23:6; j=0:23:6]").insert(_cells(1, 90))
    db.create_array("B<v:int64>[i=0:23:6; j=0:23:6]").insert(_cells(2, 60))
    view_sql = "CREATE ARRAY VIEW {} AS SELECT count(*) AS n, sum(b.v) AS s FROM {} a SIMILARITY JOIN {} b "
    view_sql += "WITH SHAPE L1(1) GROUP BY a.i, a.j"
    db.sql(view_sql.format("V", "A", "A"))
    db.sql(view_sql.format("L", "B", "B"))
    db.sql("ALTER VIEW L SET REFRESH LIMIT 100000 SECONDS")
    stream = db.create_stream("M", "ts timestamp, src string, loss int", 60, "ts")
    stream.append(_readings(0))
    db.sql(RECENT)
    return stream


def _more(db, stream) -> None:
    new = _cells(3, 200)
    a = db.array("A")
    taken = set(zip(a.to_pandas().i, a.to_pandas().j, strict=True))
    a.insert(new[[(i, j) not in taken for i, j in zip(new.i, new.j, strict=True)]].head(25))
    b = db.array("B")
    taken = set(zip(b.to_pandas().i, b.to_pandas().j, strict=True))
    b.insert(new[[(i, j) not in taken for i, j in zip(new.i, new.j, strict=True)]].tail(10))
    for minute in (1, 2, 3):
        stream.append(_readings(minute), maintain=False)  # left to the pass


def test_a_pass_maintains_streams_and_decides_limits_and_refreshes_with_all(db) -> None:
    stream = _warehouse(db)
    _more(db, stream)
    versions = {name: len(db.view(name).versions()) for name in ("V", "L")}

    report = db.maintain()
    assert report.ok and report.changed
    _stream_view_matches_pandas(db)
    assert [d.view for d in report.decisions] == ["L"]
    assert report.decisions[0].advanced == () and "within the limit" in report.decisions[0].reason
    assert report.refreshed == []  # V has no limit: only refreshed with refresh_all
    assert db.view("V").status()["pending"] and db.view("L").status()["pending"]
    assert {name: len(db.view(name).versions()) for name in ("V", "L")} == versions
    text = str(report)
    assert "stream view recent: 3 part(s) built" in text.lower() and "within the limit" in text

    report = db.maintain(refresh_all=True)
    assert report.ok and [r.view for r in report.refreshed] == ["V"] and report.fresh == []
    assert _view_sums(db.view("V")) == _neighbour_sums(db.array("A").to_pandas())
    assert not db.view("V").status()["pending"]

    again = db.maintain(refresh_all=True)
    assert again.ok and not again.changed and again.fresh == ["V"]


def test_a_failing_view_is_reported_and_the_others_are_maintained(db) -> None:
    """The view over A cannot take the new batch (a sum beyond int64: exact or loud); the pass
    names it, leaves it as it was, and still refreshes the view over C."""
    db.create_array("A<v:int64>[i=0:23:6; j=0:23:6]").insert(pd.DataFrame({"i": [5], "j": [5], "v": [BIG]}))
    db.create_array("C<v:int64>[i=0:23:6; j=0:23:6]").insert(_cells(4, 40))
    view_sql = "CREATE ARRAY VIEW {} AS SELECT count(*) AS n, sum(b.v) AS s FROM {} a SIMILARITY JOIN {} b "
    view_sql += "WITH SHAPE L1(1) GROUP BY a.i, a.j"
    db.sql(view_sql.format("VA", "A", "A"))
    db.sql(view_sql.format("VC", "C", "C"))
    db.array("A").insert(pd.DataFrame({"i": [5, 6], "j": [6, 5], "v": [BIG, BIG]}))
    c = db.array("C")
    c.insert(pd.DataFrame({"i": [23], "j": [23], "v": [17]}))
    before = len(db.view("VA").versions())

    report = db.maintain(refresh_all=True)
    assert not report.ok and set(report.errors) == {"VA"}
    assert "does not fit int64" in report.errors["VA"] and "VA" in report.errors["VA"]
    assert [r.view for r in report.refreshed] == ["VC"]
    assert _view_sums(db.view("VC")) == _neighbour_sums(c.to_pandas())
    assert len(db.view("VA").versions()) == before and db.view("VA").status()["pending"]
    assert any(line.startswith("error: VA: ") for line in report.lines())


def _cli(db, *arguments: str):
    return CliRunner().invoke(cli, list(arguments), obj=Context.of(db), catch_exceptions=False)


def test_the_maintain_command(db, monkeypatch) -> None:
    stream = _warehouse(db)
    _more(db, stream)
    once = _cli(db, "maintain", "--all")
    assert once.exit_code == 0, once.output
    assert once.output.count("maintenance pass at") == 1
    assert "part(s) built" in once.output and "of view V" in once.output

    loop = _cli(db, "maintain", "--all", "--every", "0.01", "--passes", "3")
    assert loop.exit_code == 0 and loop.output.count("maintenance pass at") == 3
    assert "nothing to do" in loop.output
    quiet = _cli(db, "maintain", "--all", "--every", "0.01", "--passes", "2", "--quiet")
    assert quiet.exit_code == 0 and quiet.output == ""

    usage = _cli(db, "maintain", "--passes", "2")
    assert usage.exit_code == 2 and "--passes needs --every" in usage.output
    assert _cli(db, "maintain", "--every", "0").exit_code == 2

    def interrupted(seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("arrayviews.cli.maintain._wait", interrupted)  # not time.sleep: py4j uses it
    stopped = _cli(db, "maintain", "--every", "5")
    assert stopped.exit_code == 0 and "stopped after 1 pass(es)" in stopped.output

    db.array("A").insert(pd.DataFrame({"i": [0], "j": [0], "v": [BIG]}), on_conflict="replace")
    db.array("A").insert(pd.DataFrame({"i": [0], "j": [1], "v": [BIG]}), on_conflict="replace")
    failed = _cli(db, "maintain", "--all")
    assert failed.exit_code == 1 and "error: V: " in failed.output


def test_two_passes_at_once_on_one_warehouse(spark, tmp_path) -> None:
    location = str(tmp_path / "warehouse")
    db = arrayviews.connect(location, spark=spark)
    stream = _warehouse(db)
    _more(db, stream)

    def one_pass():
        report = arrayviews.connect(location, spark=spark).maintain(refresh_all=True)
        return {"errors": report.errors, "refreshed": [r.view for r in report.refreshed]}

    children = [fork(spark, tmp_path / "results", one_pass, label=f"pass-{k}") for k in range(2)]
    outcomes = [child.wait() for child in children]
    for outcome in outcomes:
        assert outcome.code == 0 and not outcome.killed, outcome.error
        assert outcome.value["errors"] == {}, outcome.value
    assert _view_sums(db.view("V")) == _neighbour_sums(db.array("A").to_pandas())
    assert not db.view("V").status()["pending"]
    _stream_view_matches_pandas(db)
    assert not db.maintain(refresh_all=True).changed
