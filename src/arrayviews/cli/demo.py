"""The main job: a real Hubble image arrives in batches, is stored as an array and cooked by operators."""

from __future__ import annotations

import time

import numpy as np
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table
from scipy import ndimage

from arrayviews.cli.render import horizontal_table
from arrayviews.database import Database

console = Console()
IMAGE = "hubble"
DERIVED = ("hubble_sources", "hubble_coarse")


def load_image() -> np.ndarray:
    """The Hubble eXtreme Deep Field image shipped with scikit-image, as luminance in [0, 1]."""
    from skimage.data import hubble_deep_field

    rgb = hubble_deep_field().astype(np.float64) / 255.0
    return rgb @ np.array([0.2126, 0.7152, 0.0722])


def _reset(db: Database) -> None:
    for name in (IMAGE, *DERIVED):
        if name in {n.lower() for n in db.arrays()}:
            db.drop_array(name)


def run_image_demo(db: Database, batches: int = 8) -> dict:
    """Part 1: a real Hubble image in batches, array operators and a window aggregate, checked."""
    started = time.perf_counter()
    timings: dict[str, float] = {}
    checks: list[tuple[str, bool]] = []
    image = load_image()
    height, width = image.shape
    console.print(f"[bold]arrayviews demo[/bold] on {db}")
    console.print(f"Hubble deep field: {height} x {width} pixels (scikit-image), luminance as float64")
    _reset(db)
    array = db.create_array(f"{IMAGE}<lum:float64>[y=0:{height - 1}:128; x=0:{width - 1}:128]")

    bands = np.array_split(np.arange(height), batches)
    step = time.perf_counter()
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("ingesting batches", total=len(bands))
        for band in bands:
            array.write_dense(image[band], origin=(int(band[0]), 0))
            progress.advance(task)
    timings["ingest"] = time.perf_counter() - step
    checks.append(("full image round trip", np.array_equal(array.to_numpy(), image)))
    checks.append(
        (
            "time travel to batch 2",
            np.array_equal(
                array.at_version(2).to_numpy(masked=True).mask.sum(),
                (height - len(bands[0]) - len(bands[1])) * width,
            ),
        )
    )

    step = time.perf_counter()
    compacted = array.compact()
    timings["compact"] = time.perf_counter() - step
    checks.append(("content unchanged by compaction", np.array_equal(array.to_numpy(), image)))

    step = time.perf_counter()
    centre = array.subarray(y=(300, 499), x=(400, 649))
    checks.append(("subarray", np.array_equal(centre.to_numpy(), image[300:500, 400:650])))
    threshold = float(np.quantile(image, 0.99))
    sources = (
        array.filter(f"lum > {threshold!r}")
        .apply("contrast", f"lum / {float(image.mean())!r}")
        .store(DERIVED[0])
    )
    reference_count = int((image > threshold).sum())
    checks.append(("bright sources (filter + apply + store)", sources.count() == reference_count))
    coarse = array.regrid([16, 16], "avg(lum)", "max(lum)", "stdev(lum)").store(DERIVED[1])
    blocks = image[: height // 16 * 16, : width // 16 * 16].reshape(height // 16, 16, width // 16, 16)
    checks.append(
        (
            "regrid 16x16 avg",
            np.allclose(coarse.to_numpy("lum_avg")[: height // 16, : width // 16], blocks.mean(axis=(1, 3))),
        )
    )
    totals = array.aggregate("count(*)", "avg(lum)", "max(lum)", "var(lum)").to_pandas().iloc[0]
    checks.append(
        (
            "global aggregate",
            int(totals["count"]) == image.size
            and np.isclose(totals["lum_avg"], image.mean())
            and np.isclose(totals["lum_var"], image.var(ddof=1)),
        )
    )
    rows = array.aggregate("avg(lum)", by=["y"]).to_numpy()
    checks.append(("aggregate by row", np.allclose(rows, image.mean(axis=1))))
    smoothed = array.window({"y": (2, 2), "x": (2, 2)}, "avg(lum)").to_numpy()
    ones = np.ones_like(image)
    expected = ndimage.uniform_filter(image, 5, mode="constant") / ndimage.uniform_filter(
        ones, 5, mode="constant"
    )
    checks.append(("window 5x5 avg (smoothing)", np.allclose(smoothed, expected)))
    timings["operators"] = time.perf_counter() - step

    summary = Table(title="what the demo did")
    summary.add_column("step")
    summary.add_column("result")
    summary.add_row("ingest", f"{len(bands)} batches, {image.size} cells, {timings['ingest']:.1f} s")
    summary.add_row("compact", f"{compacted}")
    summary.add_row(
        "bright sources", f"{reference_count} cells above the 99th percentile -> array {DERIVED[0]}"
    )
    summary.add_row("coarse grid", f"{coarse.schema.to_text()}")
    summary.add_row(
        "image statistics",
        f"mean {totals['lum_avg']:.4f}, max {totals['lum_max']:.4f}, var {totals['lum_var']:.5f}",
    )
    summary.add_row("operators", f"{timings['operators']:.1f} s")
    console.print(summary)
    console.print(
        horizontal_table(
            db.array(IMAGE).versions().drop(columns=["snapshot_id"]).head(20), title=f"versions of {IMAGE}"
        )
    )
    chunk_stats = array.chunks()
    console.print(
        f"{len(chunk_stats)} chunks, {int(chunk_stats['bytes'].sum())} bytes of cell data, read from metadata only"
    )
    for name, ok in checks:
        console.print(
            f"  [{'green' if ok else 'red'}]{'ok  ' if ok else 'FAIL'}[/] {name} (checked against numpy)"
        )
    total = time.perf_counter() - started
    console.print(f"image part done in {total:.1f} s")
    return {"timings": timings, "checks": dict(checks), "seconds": total}


def run_demo(db: Database, batches: int = 8, nights: int = 8) -> dict:
    """The main job: the image part, a sky catalog whose galaxy-group view is kept fresh, a network
    stream with a pattern view and a sliding-window view, an uncertain catalog, and a time grid."""
    from arrayviews.cli.grid_demo import run_grid_demo
    from arrayviews.cli.sky_demo import run_sky_demo
    from arrayviews.cli.stream_demo import run_stream_demo
    from arrayviews.cli.uncertain_demo import run_uncertain_demo

    image = run_image_demo(db, batches)
    sky = run_sky_demo(db, nights)
    streams = run_stream_demo(db)
    uncertain = run_uncertain_demo(db)
    grid = run_grid_demo(db)
    failed = [
        name
        for part in (image, sky, streams, uncertain, grid)
        for name, ok in part["checks"].items()
        if not ok
    ]
    if failed:
        raise SystemExit(f"demo: checks failed: {', '.join(failed)}")
    console.print(
        "[bold green]demo finished[/bold green]: every check against an independent reference passed"
    )
    return {"image": image, "sky": sky, "streams": streams, "uncertain": uncertain, "grid": grid}
