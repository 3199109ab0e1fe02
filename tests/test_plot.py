"""A.plot() draws what the cells hold at their coordinates; ``arrayviews plot`` writes a PNG."""

from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from arrayviews.cli.main import Context, cli
from arrayviews.model.errors import ValidationError

matplotlib = pytest.importorskip("matplotlib")


def test_plots_hold_the_cells_at_their_coordinates(db, tmp_path) -> None:
    import matplotlib.image
    import matplotlib.pyplot as plt

    line = db.create_array("L<v:float64>[t=10:19:5]")
    values = np.sin(np.arange(10.0))
    values[3] = np.nan
    line.insert({"t": np.delete(np.arange(10, 20), 3), "v": np.delete(values, 3)})
    ax = line.plot()
    x, y = ax.lines[0].get_data()
    np.testing.assert_array_equal(x, np.arange(10, 20))
    np.testing.assert_array_equal(y, values)  # the empty cell is a gap (NaN)
    assert ax.get_xlabel() == "t"
    plt.close(ax.figure)

    grid = db.create_array("G<h:int16, w:float64>[y=-2:2:5; x=100:106:4]")
    heights = np.arange(35, dtype=np.int16).reshape(5, 7)
    grid.write_dense({"h": heights, "w": heights * 0.5})
    with pytest.raises(ValidationError, match="attributes h, w"):
        grid.plot()
    ax = grid.plot("h", cmap="terrain")
    image = ax.images[0]
    np.testing.assert_array_equal(image.get_array(), heights.astype(np.float64))
    assert tuple(image.get_extent()) == (99.5, 106.5, 2.5, -2.5)  # cell centres on their coordinates
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("x", "y")
    plt.close(ax.figure)
    with pytest.raises(ValidationError, match="3 dimensions"):
        db.create_array("C<v:float64>[a=0:1:2; b=0:1:2; c=0:1:2]").plot()

    target = tmp_path / "grid.png"
    result = CliRunner().invoke(
        cli,
        ["plot", "G", str(target), "--attr", "w", "--dpi", "50"],
        obj=Context.of(db),
        catch_exceptions=False,
    )
    assert result.exit_code == 0 and str(target) in result.output
    assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    picture = matplotlib.image.imread(str(target))
    assert picture.ndim == 3 and min(picture.shape[:2]) > 50
