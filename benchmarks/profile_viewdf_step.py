"""cProfile of one in-process ViewDF maintenance step (issue 11): where the fixed cost goes."""

from __future__ import annotations

import cProfile
import pstats
import sys

import arrayviews
from benchmarks.common import scratch_dir
from benchmarks.viewdf import SCHEMA, Bench, _pattern_views, _set_execution, minute_batch


def main(steps: int = 12, pairs: int = 1_000) -> None:
    db = arrayviews.connect(scratch_dir("viewdf-profile-"))
    bench = Bench(db)
    _set_execution(db, "local")
    stream = db.create_stream("m", SCHEMA, 60, "ts")
    bench.append(stream, minute_batch(0, pairs, high_share=0.1))
    _pattern_views(db, "m", ("generated",))
    for minute in range(1, steps):
        bench.append(stream, minute_batch(minute, pairs, high_share=0.1))
        bench.maintain()
    bench.append(stream, minute_batch(steps, pairs, high_share=0.1))
    profile = cProfile.Profile()
    profile.enable()
    elapsed = bench.maintain()
    profile.disable()
    print(f"profiled step {steps}: {elapsed:.3f} s")
    pstats.Stats(profile, stream=sys.stdout).sort_stats("cumulative").print_stats(45)


if __name__ == "__main__":
    main()
