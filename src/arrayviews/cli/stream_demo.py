"""Demo part 3: network packet-loss readings arrive minute by minute; a pattern view (four or more
consecutive high-loss minutes per path) and a sliding-window view (worst and total loss per source
over ten minutes) are kept fresh by ViewDF maintenance and checked against naive recomputation."""

from __future__ import annotations

import time

import pandas as pd
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from arrayviews.database import Database
from arrayviews.datasets.network import minute_batch

console = Console()
STREAM, PATTERN, WINDOW = "probes", "lossy_paths", "worst_sources"
PATTERN_VIEW = f"""CREATE VIEW {PATTERN} AS
SELECT src, dest, count(*) AS minutes, sum(loss) AS lost
FROM {STREAM} PATTERN [a, b, c, d+]
WHERE a.loss > 10 AND b.loss > 10 AND c.loss > 10 AND d.loss > 10
GROUP BY src, dest"""
WINDOW_VIEW = f"""CREATE VIEW {WINDOW} AS
SELECT src, max(loss) AS worst, sum(loss) AS lost FROM {STREAM} [WINDOW 10 MINUTES]
GROUP BY src HAVING max(loss) > 40"""


def _reset(db: Database) -> None:
    for view in (WINDOW, PATTERN):
        if view in db.stream_views():
            db.drop_stream_view(view)
    if STREAM in db.streams():
        db.drop_stream(STREAM)


def _naive_pattern(rows: pd.DataFrame, part: int) -> set[tuple]:
    """Per path, the run of consecutive high minutes ending at ``part`` (recomputed from all rows)."""
    found = set()
    for (src, dest), path in rows[rows.part <= part].groupby(["src", "dest"]):
        by_part = dict(zip(path.part, path.loss, strict=True))
        run, start = [], part
        while start in by_part and by_part[start] > 10:
            run.append(by_part[start])
            start -= 1
        if len(run) >= 4:
            found.add((src, dest, len(run), sum(run)))
    return found


def _naive_window(rows: pd.DataFrame, part: int) -> set[tuple]:
    recent = rows[(rows.part > part - 10) & (rows.part <= part)]
    grouped = recent.groupby("src").loss.agg(["max", "sum"]).reset_index()
    return {(r.src, int(r["max"]), int(r["sum"])) for _, r in grouped.iterrows() if r["max"] > 40}


def run_stream_demo(db: Database, minutes: int = 12, history: int = 6, pairs: int = 300) -> dict:
    _reset(db)
    console.print(
        f"[bold]network probes[/bold]: {pairs} paths, one packet-loss reading per path per minute; "
        f"views: {PATTERN} (PATTERN \\[a, b, c, d+], loss > 10) and {WINDOW} (10-minute window)"
    )
    stream = db.create_stream(STREAM, "ts timestamp, src string, dest string, loss int", 60, "ts")
    batches = [minute_batch(m, pairs, seed=5) for m in range(history + minutes)]
    # a third of the paths' readings of one minute arrive late, after later minutes
    delayed_minute = history + 2
    held_back = batches[delayed_minute].index % 3 == 0
    late = batches[delayed_minute][held_back].assign(loss=55)
    batches[delayed_minute] = batches[delayed_minute][~held_back]
    for batch in batches[:history]:
        stream.append(batch)
    started = time.perf_counter()
    db.sql(PATTERN_VIEW)
    db.sql(WINDOW_VIEW)
    console.print(
        f"{history} minutes of history; both views translated to ViewDFs and backfilled in "
        f"{time.perf_counter() - started:.1f} s"
    )
    seconds = []
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), console=console,
    ) as progress:  # fmt: skip
        task = progress.add_task("minute batches", total=minutes)
        for batch in batches[history:]:
            result = stream.append(batch)
            seconds.append(sum(m.seconds for m in result.maintenance))
            progress.advance(task)
    recomputed = stream.append(late).maintenance
    rows = stream.read().toPandas().rename(columns={"_part": "part"})
    first = int(rows.part.min())
    checks = {}
    for view, naive, columns in (
        (PATTERN, _naive_pattern, ["src", "dest", "minutes", "lost"]),
        (WINDOW, _naive_window, ["src", "worst", "lost"]),
    ):
        stored = db.stream_view(view).to_pandas()
        agree = True
        for part in range(first, int(rows.part.max()) + 1):
            stamp = pd.Timestamp(part * 60, unit="s")
            mine = stored[stored["PART_TIMESTAMP"] == stamp]
            got = {
                tuple(int(v) if isinstance(v, int | float) else v for v in r)
                for r in mine[columns].itertuples(index=False)
            }
            agree &= got == naive(rows.assign(loss=rows.loss.astype(int)), part)
        checks[f"{view} equals naive recomputation over the whole stream"] = agree
    mean = sum(seconds) / len(seconds)
    console.print(
        f"mean maintenance {mean:.2f} s per minute batch (both views, with any helper); {len(late)} "
        f"readings of minute {delayed_minute} arriving late recomputed "
        f"{sum(len(m.recomputed) for m in recomputed)} view parts"
    )
    newest = db.sql(
        f"SELECT * FROM {PATTERN} WHERE PART_TIMESTAMP = (SELECT max(PART_TIMESTAMP) FROM {PATTERN})"
    )
    console.print(f"{PATTERN} now: {newest.count()} paths with four or more consecutive lossy minutes")
    for name, ok in checks.items():
        console.print(f"  [{'green' if ok else 'red'}]{'ok  ' if ok else 'FAIL'}[/] {name}")
    return {"checks": checks, "mean_maintenance_s": mean}
