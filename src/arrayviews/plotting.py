"""Pictures of arrays with matplotlib: a line over the coordinates for 1-D arrays, an image with real
coordinates on the axes and a colour bar for 2-D arrays. Empty cells are gaps (NaN, masked)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg", force=False)  # files, not windows, unless a notebook chose its own backend

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from arrayviews.model.errors import ValidationError  # noqa: E402


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
    if values.dtype.kind == "M":
        raise ValidationError(
            f"array {schema.name}: attribute {attribute} is datetime64; plot draws numbers",
            array=schema.name,
            column=attribute,
        )
    data = np.ma.masked_array(np.ma.getdata(values).astype(np.float64), mask=np.ma.getmaskarray(values))
    if ax is None:
        _, ax = plt.subplots()
    dims = schema.dimensions
    if schema.ndim == 1:
        coordinates = np.arange(dims[0].low, dims[0].high + 1)
        ax.plot(coordinates, data.filled(np.nan), **style)
        ax.set_xlabel(dims[0].name)
        ax.set_ylabel(f"{attribute} ({spec.type})")
    else:
        rows, columns = dims
        extent = (columns.low - 0.5, columns.high + 0.5, rows.high + 0.5, rows.low - 0.5)
        image = ax.imshow(
            data, extent=extent, origin="upper", interpolation="nearest", aspect="auto", **style
        )
        ax.set_xlabel(columns.name)
        ax.set_ylabel(rows.name)
        ax.figure.colorbar(image, ax=ax, label=f"{attribute} ({spec.type})")
    ax.set_title(schema.name)
    return ax


def save_plot(array, path: str, attribute: str | None = None, dpi: int = 100) -> str:
    """Draw ``array`` and write the picture to ``path`` (PNG unless the extension says otherwise)."""
    ax = plot_array(array, attribute)
    ax.figure.savefig(path, dpi=dpi, bbox_inches="tight")
    plt.close(ax.figure)
    return path
