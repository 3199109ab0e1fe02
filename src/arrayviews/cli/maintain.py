"""``arrayviews maintain``: maintenance passes over the warehouse, once or every few seconds until
interrupted (the scheduler of refresh limits and stream views run as a service)."""

from __future__ import annotations

import math
import sys
import time

import click

#: The longest interval between passes (about 31 years): ``time.sleep`` takes no more.
MAX_INTERVAL = 1e9


def _interval(context, parameter, value: float | None) -> float | None:
    """``--every`` checked: a finite number of seconds above 0 and at most :data:`MAX_INTERVAL`
    (NaN passed click's range check and made the passes run back to back; inf crashed the wait)."""
    if value is not None and not (math.isfinite(value) and 0 < value <= MAX_INTERVAL):
        raise click.BadParameter(f"{value} is not a number of seconds above 0 and at most {MAX_INTERVAL:g}")
    return value


def _wait(seconds: float) -> None:
    """Sleep until the next pass is due (a Ctrl-C arrives here, between passes, as a rule)."""
    time.sleep(seconds)


@click.command()
@click.option(
    "--every",
    "interval",
    metavar="SECONDS",
    type=float,
    callback=_interval,
    default=None,
    help="Run a pass every SECONDS (start to start) until interrupted; default: one pass.",
)
@click.option(
    "--passes",
    metavar="N",
    type=click.IntRange(min=1),
    default=None,
    help="Stop after this many passes (with --every; default: until Ctrl-C).",
)
@click.option(
    "--all",
    "refresh_all",
    is_flag=True,
    help="Also refresh every array view without a refresh limit that has pending batches.",
)
@click.option("--quiet", is_flag=True, help="Print only passes that changed something or failed.")
@click.pass_obj
def maintain(context, interval: float | None, passes: int | None, refresh_all: bool, quiet: bool) -> None:
    """Keep the warehouse's views fresh: each pass brings stream views up to date, keeps array
    views with a refresh limit (ALTER VIEW V SET REFRESH LIMIT n SECONDS) within it and, with --all,
    refreshes the other stale array views. A view that fails is reported and the others go on; the
    exit status is 1 when any pass had a failure. Two maintainers on one warehouse are safe: every
    refresh is one validated commit."""
    if passes is not None and interval is None:
        raise click.UsageError("--passes needs --every (a single pass is the default)")
    db = context.db
    count, failed = 0, False
    try:
        while True:
            start = time.monotonic()
            report = db.maintain(refresh_all=refresh_all)
            count += 1
            failed = failed or not report.ok
            if not quiet or report.changed or not report.ok:
                click.echo(str(report))
            if interval is None or (passes is not None and count >= passes):
                break
            _wait(max(0.0, interval - (time.monotonic() - start)))
    except KeyboardInterrupt:
        click.echo(f"stopped after {count} pass(es)")
    if failed:
        sys.exit(1)
