"""Chunk fragment codec: the numpy form of the cells of one chunk and its dense/sparse byte encoding.

Physical layout (chosen by measurement, see docs/storage-layout.md): an array is stored as rows of
*fragments*, each holding some cells of exactly one chunk. Fragments of one chunk never share a cell,
so every fragment can be read and processed on its own. A fragment is encoded **dense** (a value
buffer over the whole clipped chunk box plus a validity bitmap, omitted when every cell is present)
or **sparse** (sorted int64 local offsets plus one value per present cell), whichever is smaller:
dense when ``volume * (width + 1/8) <= n * (width + 8)``. Dense satellite grids therefore pay no
coordinate overhead, and a sparse sky catalog in a domain of 10^15 cells pays 8 bytes per cell.

String attributes (numpy object arrays of ``str`` in memory) are variable-width: their value payload
is the Arrow string layout, ``count + 1`` little-endian int32 offsets followed by the UTF-8 bytes
(``count`` is the box volume when dense, the present cells when sparse; absent cells of a dense
fragment hold the empty string). Encoding and decoding go through pyarrow, never a Python loop over
cells.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

OFFSET_DTYPE = np.dtype("<i8")
TEXT_OFFSET_DTYPE = np.dtype("<i4")
#: The width the dense/sparse choice assumes for a string value (an offset plus a few bytes of text).
TEXT_WIDTH = 8


def is_text(dtype: np.dtype) -> bool:
    """Whether values of ``dtype`` are variable-width strings (object arrays of ``str``)."""
    return np.dtype(dtype).kind == "O"


def value_width(dtype: np.dtype) -> int:
    """Bytes per value the dense/sparse choice assumes."""
    return TEXT_WIDTH if is_text(dtype) else np.dtype(dtype).itemsize


def blank(dtype: np.dtype, count: int) -> np.ndarray:
    """``count`` filler values of ``dtype`` (zeros, or empty strings for text)."""
    if is_text(dtype):
        return np.full(count, "", dtype=object)
    return np.zeros(count, dtype=dtype)


def text_array(column: np.ndarray | pa.Array) -> pa.Array:
    """Strings as an Arrow string array without nulls (a None, where one slipped in, becomes "")."""
    array = (
        column if isinstance(column, pa.Array) else pa.array(np.asarray(column, dtype=object), pa.string())
    )
    if pa.types.is_large_string(array.type):
        array = array.cast(pa.string())
    return array.fill_null("") if array.null_count else array


def text_bytes(column: np.ndarray | pa.Array) -> np.ndarray:
    """The payload of a string column: int32 offsets (count + 1, starting at 0) then UTF-8 bytes."""
    array = text_array(column)
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=TEXT_OFFSET_DTYPE)[array.offset : array.offset + len(array) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    data = data[offsets[0] : offsets[-1]]
    offsets = (offsets - offsets[0]).astype(TEXT_OFFSET_DTYPE, copy=False)
    return np.concatenate([offsets.view(np.uint8), data])


def text_arrow(payload: bytes | memoryview | np.ndarray, count: int) -> pa.StringArray:
    """The Arrow string array held by a string payload of ``count`` values (no copy)."""
    raw = np.frombuffer(payload, dtype=np.uint8) if not isinstance(payload, np.ndarray) else payload
    head = (count + 1) * TEXT_OFFSET_DTYPE.itemsize
    offsets = pa.py_buffer(raw[:head].copy())  # a copy: aligned for Arrow
    data = pa.py_buffer(np.ascontiguousarray(raw[head:]))
    return pa.Array.from_buffers(pa.string(), count, [None, offsets, data])


def text_values(payload: bytes | memoryview | np.ndarray, count: int) -> np.ndarray:
    """The strings of a string payload as a numpy object array."""
    if count == 0:
        return np.zeros(0, dtype=object)
    return text_arrow(payload, count).to_numpy(zero_copy_only=False)


def text_range(column: np.ndarray | pa.Array) -> tuple[str | None, str | None]:
    """Smallest and largest string (by UTF-8 bytes, which is Spark's string order), None when empty."""
    array = text_array(column)
    if len(array) == 0:
        return None, None
    found = pc.min_max(array.cast(pa.binary()))
    low, high = found["min"].as_py(), found["max"].as_py()
    return (None if low is None else low.decode("utf-8"), None if high is None else high.decode("utf-8"))


@dataclass
class Fragment:
    """Cells of one chunk in numpy form.

    ``offsets`` are the sorted local offsets (C order in the clipped chunk box) of the present
    cells; ``values[a]`` holds attribute ``a`` of each present cell in the same order; ``nulls[a]``,
    when present, marks the cells whose attribute ``a`` is null.
    """

    chunk: tuple[int, ...]
    offsets: np.ndarray
    values: dict[str, np.ndarray]
    nulls: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.offsets)

    def take(self, positions: np.ndarray) -> Fragment:
        """The fragment restricted to ``positions`` (indices or a boolean mask over its cells)."""
        return Fragment(
            self.chunk,
            self.offsets[positions],
            {name: column[positions] for name, column in self.values.items()},
            {name: mask[positions] for name, mask in self.nulls.items() if mask[positions].any()},
        )


@dataclass(frozen=True)
class EncodedFragment:
    """The byte form of a fragment, as stored in one row of the fragment table.

    Byte strings are held as 1-d uint8 numpy arrays (often views of the caller's data), so building
    the Arrow columns costs one copy.
    """

    chunk: tuple[int, ...]
    n_cells: int
    dense: bool
    cells: np.ndarray
    values: dict[str, np.ndarray]
    nulls: dict[str, np.ndarray]
    minimum: dict[str, object]
    maximum: dict[str, object]

    @property
    def nbytes(self) -> int:
        return (
            len(self.cells)
            + sum(len(b) for b in self.values.values())
            + sum(len(b) for b in self.nulls.values())
        )


def prefers_dense(n_cells: int, volume: int, value_width: int) -> bool:
    """True if the dense encoding of ``n_cells`` present cells out of ``volume`` is not larger."""
    if n_cells == volume:
        return True
    return volume * (value_width + 0.125) <= n_cells * (value_width + 8)


def value_range(values: np.ndarray, nulls: np.ndarray | None) -> tuple[object, object]:
    """Minimum and maximum ignoring NaN and nulls, as Python scalars (None when there is no value)."""
    if nulls is not None:
        values = values[~nulls]
    if is_text(values.dtype):
        return text_range(values)
    if values.dtype.kind == "M":  # NaT is no minimum or maximum (like NaN)
        values = values[~np.isnat(values)]
    if len(values) == 0:
        return None, None
    if values.dtype.kind == "f":
        # fmin/fmax skip NaN without copying the values; the result is NaN only if all are NaN.
        low, high = np.fmin.reduce(values), np.fmax.reduce(values)
        return (None, None) if np.isnan(low) else (low.item(), high.item())
    return values.min().item(), values.max().item()


def encode(fragment: Fragment, volume: int, dtypes: dict[str, np.dtype]) -> EncodedFragment:
    """Encode a fragment of a chunk whose clipped box holds ``volume`` cells."""
    n_cells = fragment.size
    width = max((value_width(dtypes[a]) for a in dtypes), default=1)
    dense = prefers_dense(n_cells, volume, width)
    minimum: dict[str, object] = {}
    maximum: dict[str, object] = {}
    values: dict[str, np.ndarray] = {}
    nulls: dict[str, np.ndarray] = {}
    if dense:
        full = n_cells == volume
        cells = _bytes_of(
            np.zeros(0, np.uint8) if full else np.packbits(_mask(fragment.offsets, volume), bitorder="little")
        )
    else:
        cells = _bytes_of(np.asarray(fragment.offsets, dtype=OFFSET_DTYPE))
    for name, dtype in dtypes.items():
        column = np.asarray(fragment.values[name], dtype=dtype)
        null_mask = fragment.nulls.get(name)
        minimum[name], maximum[name] = value_range(column, null_mask)
        if dense and n_cells != volume:
            scattered = blank(dtype, volume)
            scattered[fragment.offsets] = column
            column = scattered
            if null_mask is not None:
                expanded = np.zeros(volume, dtype=bool)
                expanded[fragment.offsets] = null_mask
                null_mask = expanded
        values[name] = _payload(column)
        if null_mask is not None and null_mask.any():
            nulls[name] = np.packbits(null_mask, bitorder="little")
    return EncodedFragment(fragment.chunk, n_cells, dense, cells, values, nulls, minimum, maximum)


def _payload(column: np.ndarray) -> np.ndarray:
    """The stored bytes of a value column (little-endian fixed width, or the string layout)."""
    if is_text(column.dtype):
        return text_bytes(column)
    return _bytes_of(column.astype(column.dtype.newbyteorder("<"), copy=False))


def _bytes_of(array: np.ndarray) -> np.ndarray:
    """The bytes of an array as a contiguous 1-d uint8 array (a view when already contiguous)."""
    return np.ascontiguousarray(array).reshape(-1).view(np.uint8)


def _mask(offsets: np.ndarray, volume: int) -> np.ndarray:
    mask = np.zeros(volume, dtype=bool)
    mask[offsets] = True
    return mask


def encode_full_block(
    values: dict[str, np.ndarray], volume: int, dtypes: dict[str, np.dtype], with_range: bool = True
) -> EncodedFragment:
    """Encode a box in which every cell is present (values in C order), without offsets or bitmap.

    ``with_range=False`` skips the min/max (for pieces that are shipped, never stored).
    """
    minimum, maximum, payloads = {}, {}, {}
    for name, dtype in dtypes.items():
        column = np.asarray(values[name], dtype=dtype)
        minimum[name], maximum[name] = value_range(column, None) if with_range else (None, None)
        payloads[name] = _payload(column)
    return EncodedFragment((), volume, True, np.zeros(0, np.uint8), payloads, {}, minimum, maximum)


def decode_offsets(dense: bool, n_cells: int, cells: bytes | memoryview, volume: int) -> np.ndarray:
    """Local offsets of the present cells of an encoded fragment."""
    if not dense:
        return np.frombuffer(cells, dtype=OFFSET_DTYPE, count=n_cells).astype(np.int64, copy=False)
    if n_cells == volume:
        return np.arange(volume, dtype=np.int64)
    mask = np.unpackbits(np.frombuffer(cells, dtype=np.uint8), count=volume, bitorder="little").view(bool)
    return np.flatnonzero(mask).astype(np.int64, copy=False)


def decode_values(
    dense: bool, n_cells: int, volume: int, payload: bytes | memoryview, dtype: np.dtype, offsets: np.ndarray
) -> np.ndarray:
    """Values of the present cells, in offset order."""
    if is_text(dtype):
        block = text_values(payload, volume if dense else n_cells)
        return block if (not dense or n_cells == volume) else block[offsets]
    dtype = np.dtype(dtype).newbyteorder("<")
    if not dense:
        return np.frombuffer(payload, dtype=dtype, count=n_cells)
    block = np.frombuffer(payload, dtype=dtype, count=volume)
    return block if n_cells == volume else block[offsets]


def decode_nulls(
    dense: bool, n_cells: int, volume: int, packed: bytes | memoryview | None, offsets: np.ndarray
) -> np.ndarray | None:
    """Null mask of the present cells, or None when the fragment stores no nulls for the attribute."""
    if packed is None or len(packed) == 0:
        return None
    count = volume if dense else n_cells
    mask = np.unpackbits(np.frombuffer(packed, dtype=np.uint8), count=count, bitorder="little").view(bool)
    return mask if (not dense or n_cells == volume) else mask[offsets]


def dense_block(
    dense: bool,
    n_cells: int,
    volume: int,
    payload: bytes | memoryview,
    dtype: np.dtype,
    cells: bytes | memoryview,
) -> tuple[np.ndarray, np.ndarray | None]:
    """The values over the whole clipped chunk box and a presence mask (None when every cell is present).

    Avoids the gather/scatter round trip for dense fragments; kernels that work on blocks use this.
    """
    if is_text(dtype):
        if dense:
            block = text_values(payload, volume)
            if n_cells == volume:
                return block, None
            mask = np.unpackbits(np.frombuffer(cells, dtype=np.uint8), count=volume, bitorder="little")
            return block, mask.view(bool)
        offsets = decode_offsets(False, n_cells, cells, volume)
        block = blank(dtype, volume)
        block[offsets] = text_values(payload, n_cells)
        return block, _mask(offsets, volume)
    dtype = np.dtype(dtype).newbyteorder("<")
    if dense:
        block = np.frombuffer(payload, dtype=dtype, count=volume)
        if n_cells == volume:
            return block, None
        mask = np.unpackbits(np.frombuffer(cells, dtype=np.uint8), count=volume, bitorder="little").view(bool)
        return block, mask
    offsets = decode_offsets(False, n_cells, cells, volume)
    block = np.zeros(volume, dtype=dtype)
    block[offsets] = np.frombuffer(payload, dtype=dtype, count=n_cells)
    return block, _mask(offsets, volume)
