"""Pictures of arrays with matplotlib: a line over the coordinates for 1-D arrays, an image with real
coordinates on the axes and a colour bar for 2-D arrays (a dimension with a coordinate scale shows its
scaled coordinates and unit). Empty cells are gaps (NaN, masked)."""

from __future__ import annotations

import os

import matplotlib

matplotlib.use("Agg", force=False)  # files, not windows, unless a notebook chose its own backend

import matplotlib.dates as mdates  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.backend_bases import FigureCanvasBase  # noqa: E402

from arrayviews.model.errors import ValidationError  # noqa: E402
from arrayviews.model.time_scale import TimeScale  # noqa: E402


def plot_array(array, attribute: str | None = None, ax=None, **style):
    """Draw one attribute of a 1-D or 2-D array on ``ax`` (a new figure when None); returns the axes.

    Extra keyword arguments go to ``Axes.plot`` (1-D) or ``Axes.imshow`` (2-D, e.g. ``cmap``)."""
    schema = array.schema
    if attribute is None:
        if len(schema.attributes) != 1:
            raise ValidationError(
                f"array {schema.name} has attributes {', '.join(schema.attribute_names)}: plot(attr=...) names one",
                array=schema.name,
            )
        attribute = schema.attributes[0].name
    spec = schema.attribute(attribute)
    if schema.ndim not in (1, 2):
        raise ValidationError(
            f"array {schema.name} has {schema.ndim} dimensions; plot draws 1-D and 2-D arrays "
            "(select one coordinate of the others first, e.g. A[:, :, 0])",
            array=schema.name,
        )
    values = array.to_numpy(attribute, masked=True)
    if values.dtype.kind not in "biuf":  # datetime64, string
        raise ValidationError(
            f"array {schema.name}: attribute {attribute} is {spec.type}; plot draws numbers",
            array=schema.name,
            column=attribute,
        )
    data = np.ma.masked_array(np.ma.getdata(values).astype(np.float64), mask=np.ma.getmaskarray(values))
    if ax is None:
        _, ax = plt.subplots()
    dims = schema.dimensions
    if schema.ndim == 1:
        coordinates, _, _, label = _axis(dims[0])
        ax.plot(coordinates, data.filled(np.nan), **style)
        ax.set_xlabel(label)
        ax.set_ylabel(f"{attribute} ({spec.type})")
        _date_axes(ax, dims[0], None)
    else:
        (_, top, bottom, row_label), (_, left, right, column_label) = _axis(dims[0]), _axis(dims[1])
        image = ax.imshow(
            data,
            extent=(left, right, bottom, top),
            origin="upper",
            interpolation="nearest",
            aspect="auto",
            **style,
        )
        ax.set_xlabel(column_label)
        ax.set_ylabel(row_label)
        _date_axes(ax, dims[1], dims[0])
        ax.figure.colorbar(image, ax=ax, label=f"{attribute} ({spec.type})")
    ax.set_title(schema.name)
    return ax


#: One unit of each time resolution in days (matplotlib's date numbers count days).
_DAYS_PER = {"D": 1.0, "h": 1 / 24, "m": 1 / 1440, "s": 1 / 86400, "ms": 1e-3 / 86400, "us": 1e-6 / 86400}
_DAYS_PER["ns"] = 1e-9 / 86400


def _date_axes(ax, x_dimension, y_dimension) -> None:
    """Show the axes of time dimensions as dates."""
    if isinstance(x_dimension.scale, TimeScale):
        ax.xaxis_date()
    if y_dimension is not None and isinstance(y_dimension.scale, TimeScale):
        ax.yaxis_date()


def _axis(dimension) -> tuple[np.ndarray, float, float, str]:
    """Cell centres along ``dimension``, the outer edges of its first and last cell, and the axis label:
    integer cells, or with a coordinate scale the real coordinates and the unit."""
    cells = np.arange(dimension.low, dimension.high + 1)
    scale = dimension.scale
    if scale is None:
        return cells, dimension.low - 0.5, dimension.high + 0.5, dimension.name
    if isinstance(scale, TimeScale):  # matplotlib's date numbers (days), shown as dates by _date_axes
        days = mdates.date2num(scale.coordinates(cells))
        half = (days[1] - days[0]) / 2 if len(days) > 1 else scale.step * _DAYS_PER[scale.resolution] / 2
        return days, days[0] - half, days[-1] + half, dimension.name
    half = scale.step / 2  # negative for descending coordinates: the edges swap with them
    label = f"{dimension.name} ({scale.unit})" if scale.unit else dimension.name
    return (
        scale.coordinates(cells),
        scale.coordinate(dimension.low) - half,
        scale.coordinate(dimension.high) + half,
        label,
    )


def save_plot(array, path: str, attribute: str | None = None, dpi: int = 100) -> str:
    """Draw ``array`` and write the picture to ``path`` (PNG unless the extension says otherwise);
    returns the path written. A format matplotlib does not write, a resolution below one dot per inch
    or a missing folder is refused by name before anything is drawn."""
    folder = os.path.dirname(str(path))
    suffix = os.path.splitext(str(path))[1][1:].lower()
    formats = FigureCanvasBase.get_supported_filetypes()
    if suffix and suffix not in formats:
        raise ValidationError(
            f"plot: cannot write {path}: '.{suffix}' is no picture format matplotlib writes "
            f"({', '.join(sorted(formats))})"
        )
    if not isinstance(dpi, int | float) or isinstance(dpi, bool) or not dpi >= 1:
        raise ValidationError(f"plot: the resolution is at least 1 dot per inch, got dpi={dpi!r}")
    if folder and not os.path.isdir(folder):
        raise ValidationError(f"plot: cannot write {path}: there is no folder {folder}")
    written = str(path) if suffix else f"{path}.png"
    ax = array.plot(attribute)  # an open-ended array over its cells that hold data, as plot draws it
    try:
        ax.figure.savefig(written, dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(ax.figure)
    return written
