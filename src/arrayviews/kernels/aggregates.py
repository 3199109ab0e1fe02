"""Partial aggregate states per int64 group key: compute per task, merge across tasks, finalize, pack."""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np
import pyarrow as pa

from arrayviews.kernels.exact_divide import int_quotient, wide_quotient
from arrayviews.kernels.exact_sum import NONFINITE, FloatSums, K, SumOverflow
from arrayviews.model.aggregate_calls import canonical_function
from arrayviews.model.types import numpy_dtype, type_of_dtype
from arrayviews.storage import codec

#: What a partial state can hold; "moments" means the pair (mean, m2).
NEEDS: tuple[str, ...] = ("count", "sum", "moments", "min", "max")
_NEEDS_OF = {
    "count": {"count"},
    "sum": {"count", "sum"},
    "avg": {"count", "sum"},
    "var": {"count", "moments"},
    "stdev": {"count", "moments"},
    "min": {"count", "min"},
    "max": {"count", "max"},
}
_LOW32 = np.int64(0xFFFFFFFF)


def needs_for(functions: Sequence[str] | str) -> set[str]:
    """The partial state parts that the given aggregate function(s) need (always including count)."""
    if isinstance(functions, str):
        functions = [functions]
    needs = {"count"}
    for function in functions:
        needs |= _NEEDS_OF[canonical_function(function)]
    return needs


@dataclass
class PartialStates:
    """Aligned per-group arrays; ``keys`` are sorted and unique, absent parts are None.

    ``count`` is the number of (non-null) values in the group and may be 0 for groups that only had
    null values. ``sum`` is int64 for int32/int64/bool input and float64 for float input; an integer
    sum is exact however large: ``sum + carry * 2**64`` (``carry`` is 0 unless the sum left the
    int64 range, where ``sum`` is the low 64 bits as a signed number). ``mean`` and ``m2`` (float64) are the group mean and the sum of squared deviations
    from it. ``min`` and ``max`` keep the input dtype; groups with count 0 hold the identity of the
    operation there (e.g. +inf for a float min). ``value_type`` is the input attribute type, or None
    when the states only count.
    """

    keys: np.ndarray
    count: np.ndarray
    sum: np.ndarray | None = None
    mean: np.ndarray | None = None
    m2: np.ndarray | None = None
    min: np.ndarray | None = None
    max: np.ndarray | None = None
    carry: np.ndarray | None = None
    value_type: str | None = None
    #: For float input, the exact sums (``sum`` holds their rounded values): float sums stay exact
    #: however the cells are split into partials and merged, so no cancellation is silent.
    exact: FloatSums | None = None

    def __len__(self) -> int:
        return len(self.keys)

    @property
    def needs(self) -> set[str]:
        """The parts these states hold, in the vocabulary of :data:`NEEDS`."""
        held = {"count"}
        if self.sum is not None:
            held.add("sum")
        if self.mean is not None:
            held.add("moments")
        if self.min is not None:
            held.add("min")
        if self.max is not None:
            held.add("max")
        return held

    def arrays(self) -> dict[str, np.ndarray]:
        """The present arrays by field name, ``keys`` and ``count`` first."""
        arrays = {
            f.name: getattr(self, f.name)
            for f in fields(self)
            if f.name not in ("value_type", "exact") and getattr(self, f.name) is not None
        }
        if self.exact is not None:
            for k in range(K):
                arrays[f"{_EXACT_PART}{k}"] = self.exact.parts[:, k]
            for t in range(NONFINITE):
                arrays[f"{_EXACT_NONFINITE}{t}"] = self.exact.nonfinite[:, t]
        return arrays


#: Names of the exact float sum's components and non-finite counts among :meth:`PartialStates.arrays`.
_EXACT_PART, _EXACT_NONFINITE = "exact_part_", "exact_nonfinite_"


def _exact_of(arrays: dict[str, np.ndarray]) -> FloatSums | None:
    """The exact float sums held in flattened ``arrays`` (removed from it), or None."""
    if f"{_EXACT_PART}0" not in arrays:
        return None
    parts = np.stack([arrays.pop(f"{_EXACT_PART}{k}") for k in range(K)], axis=1)
    nonfinite = np.stack([arrays.pop(f"{_EXACT_NONFINITE}{t}") for t in range(NONFINITE)], axis=1)
    return FloatSums(np.ascontiguousarray(parts, np.float64), np.ascontiguousarray(nonfinite, np.int64))


# -- helpers ---------------------------------------------------------------------------------------


def _text_extremes(
    values: np.ndarray, valid: np.ndarray | None, group_of: np.ndarray, groups: int, part: str
) -> np.ndarray:
    """Per group, the smallest (``part="min"``) or largest string by UTF-8 bytes (Spark's order) among
    the valid values; "" for groups without one (their count is 0, so the result is null there)."""
    table = pa.table({"group": group_of, "value": codec.text_array(values).cast(pa.binary())})
    if valid is not None:
        table = table.filter(pa.array(valid))
    found = table.group_by("group").aggregate([("value", part)])
    out = np.full(groups, "", dtype=object)
    out[found.column("group").to_numpy()] = (
        found.column(f"value_{part}").cast(pa.string()).to_numpy(zero_copy_only=False)
    )
    return out


def _identities(dtype: np.dtype) -> tuple[object, object]:
    """Values that leave np.minimum and np.maximum unchanged, for ``dtype``."""
    if dtype.kind == "b":
        return True, False
    if dtype.kind == "f":
        return np.inf, -np.inf
    info = np.iinfo(dtype)
    return info.max, info.min


def _group_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """Start positions of the runs of equal keys in a sorted, non-empty key array."""
    change = np.empty(len(sorted_keys), dtype=bool)
    change[0] = True
    np.not_equal(sorted_keys[1:], sorted_keys[:-1], out=change[1:])
    return np.flatnonzero(change)


def _group_index(starts: np.ndarray, length: int) -> np.ndarray:
    """For each of ``length`` sorted elements, the number of the group it belongs to."""
    marks = np.zeros(length, dtype=np.int64)
    marks[starts[1:]] = 1
    return np.cumsum(marks)


def _wide_sums(values: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Exact per-group sums of int64 ``values`` as (low 64 bits as int64, multiples of 2**64): each
    value is split into its high and low 32-bit halves, whose sums cannot wrap below 2**31 values
    per group, and the halves' sums are recombined."""
    high = np.add.reduceat(values >> 32, starts)
    low = np.add.reduceat(values & _LOW32, starts)
    high = high + (low >> 32)  # the total is high * 2**32 + (low & _LOW32)
    carry = high >> 32
    word = ((high & _LOW32).astype(np.uint64) << np.uint64(32)) | (low & _LOW32).astype(np.uint64)
    signed = word.view(np.int64)
    return signed, carry + (signed < 0)


def _exact_total(states: PartialStates, group: int) -> int:
    """The exact integer sum of one group, as a Python int."""
    return int(states.carry[group]) * 2**64 + int(states.sum[group])


def _safe_divide(numerator: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``numerator / count`` with 0 where count is 0."""
    out = np.zeros(len(count), dtype=np.float64)
    np.divide(numerator, count, out=out, where=count > 0)
    return out


def _empty(needs: set[str], value_type: str | None) -> PartialStates:
    dtype = numpy_dtype(value_type) if value_type is not None else None
    sum_dtype = np.float64 if dtype is not None and dtype.kind == "f" else np.int64
    return PartialStates(
        keys=np.empty(0, np.int64),
        count=np.empty(0, np.int64),
        sum=np.empty(0, sum_dtype) if "sum" in needs else None,
        carry=np.empty(0, np.int64) if "sum" in needs and sum_dtype is np.int64 else None,
        exact=FloatSums.zeros(0) if "sum" in needs and sum_dtype is np.float64 else None,
        mean=np.empty(0, np.float64) if "moments" in needs else None,
        m2=np.empty(0, np.float64) if "moments" in needs else None,
        min=np.empty(0, dtype) if "min" in needs else None,
        max=np.empty(0, dtype) if "max" in needs else None,
        value_type=value_type,
    )


# -- partial states ----------------------------------------------------------------------------------


def partial_states(
    keys: np.ndarray,
    values: np.ndarray | None,
    needs: set[str],
    *,
    valid: np.ndarray | None = None,
) -> PartialStates:
    """Reduce ``values`` grouped by ``keys`` to partial states holding the parts in ``needs``.

    ``values`` None means count only. ``valid`` (optional bool mask) marks the non-null values; a group
    whose values are all null still appears, with count 0. NaN is an ordinary float value: it
    propagates into sum, mean, m2, min and max of its group, as np.sum / np.min would.
    Mean and m2 use the corrected two-pass method (mean first, then deviations from it).
    """
    needs = set(needs) | {"count"}
    unknown = needs - set(NEEDS)
    if unknown:
        raise ValueError(f"unknown state parts {sorted(unknown)}; known: {', '.join(NEEDS)}")
    keys = np.asarray(keys)
    if keys.ndim != 1 or (keys.size and keys.dtype.kind not in "iu"):
        raise ValueError("keys must be a one-dimensional integer array")
    keys = keys.astype(np.int64, copy=False)
    value_type: str | None = None
    if values is None:
        if needs != {"count"}:
            raise ValueError(f"values are needed for {sorted(needs - {'count'})}")
    else:
        values = np.asarray(values)
        value_type = type_of_dtype(values.dtype)
        if values.shape != keys.shape:
            raise ValueError(f"{len(values)} values for {len(keys)} keys")
    if valid is not None:
        valid = np.asarray(valid, dtype=bool)
        if valid.shape != keys.shape:
            raise ValueError(f"{len(valid)} validity flags for {len(keys)} keys")
    if len(keys) == 0:
        return _empty(needs, value_type)

    if np.any(keys[1:] < keys[:-1]):
        order = np.argsort(keys, kind="stable")
        keys = keys[order]
        values = values[order] if values is not None else None
        valid = valid[order] if valid is not None else None
    starts = _group_starts(keys)
    states = PartialStates(keys=keys[starts], count=np.empty(0, np.int64), value_type=value_type)
    if valid is None:
        states.count = np.diff(np.append(starts, len(keys))).astype(np.int64)
    else:
        states.count = np.add.reduceat(valid.astype(np.int64), starts)
    if values is None:
        return states

    if "sum" in needs and values.dtype.kind == "f":
        # exact: the valid values of each group as one list (groups are runs of the sorted keys)
        kept = values if valid is None else values[valid]
        offsets = np.concatenate(([0], np.cumsum(states.count))).astype(np.int64)
        states.exact = FloatSums.of_lists(kept, offsets)
        states.sum = states.exact.values()
    elif "sum" in needs:
        states.sum, states.carry = _sums(values, valid, starts)
    if "moments" in needs:
        states.mean, states.m2 = _moments(values, valid, starts, states.count)
    if codec.is_text(values.dtype):
        group_of = _group_index(starts, len(keys))
        for part in ("min", "max"):
            if part in needs:
                setattr(states, part, _text_extremes(values, valid, group_of, len(starts), part))
        return states
    for which, (part, ufunc) in enumerate((("min", np.minimum), ("max", np.maximum))):
        if part in needs:  # identities only then: a datetime64 attribute is counted, never min'd here
            identity = _identities(values.dtype)[which]
            filled = values if valid is None else np.where(valid, values, identity)
            setattr(states, part, ufunc.reduceat(filled, starts))
    return states


def _sums(values: np.ndarray, valid: np.ndarray | None, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-group exact sums of integer or bool input: (low 64 bits, carry), see :func:`_wide_sums`."""
    as_int = values.astype(np.int64)
    if valid is not None:
        as_int = np.where(valid, as_int, 0)
    return _wide_sums(as_int, starts)


def _moments(
    values: np.ndarray, valid: np.ndarray | None, starts: np.ndarray, count: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Per-group mean and sum of squared deviations by the corrected two-pass method."""
    x = values.astype(np.float64)
    if valid is not None:
        x = np.where(valid, x, 0.0)
    group = _group_index(starts, len(x))
    with np.errstate(invalid="ignore", over="ignore"):
        first = _safe_divide(np.add.reduceat(x, starts), count)
        deviation = x - first[group]
        if valid is not None:
            deviation[~valid] = 0.0
        drift = np.add.reduceat(deviation, starts)
        squares = np.add.reduceat(deviation * deviation, starts)
        mean = first + _safe_divide(drift, count)
        m2 = np.maximum(squares - _safe_divide(drift * drift, count), 0.0)
    return mean, m2


# -- merging -------------------------------------------------------------------------------------------


def merge_states(parts: Sequence[PartialStates]) -> PartialStates:
    """Combine partial states from many tasks into one state per key.

    Counts, sums, minima and maxima combine directly; the moments use Chan et al.'s parallel form,
    generalised to any number of partials per key: with n = sum n_k and mean = sum n_k mean_k / n,
    m2 = sum m2_k + sum n_k (mean_k - mean)^2 (evaluated with a correction for the rounding of mean).
    """
    if not parts:
        raise ValueError("merge_states needs at least one partial state")
    first = parts[0]
    for other in parts[1:]:
        if other.needs != first.needs or other.value_type != first.value_type:
            raise ValueError(
                f"cannot merge states holding {sorted(other.needs)} of {other.value_type} with states "
                f"holding {sorted(first.needs)} of {first.value_type}"
            )
    if len(parts) == 1:
        return first
    listed = [p.arrays() for p in parts]
    merged = {name: np.concatenate([a[name] for a in listed]) for name in listed[0]}
    if len(merged["keys"]) == 0:
        return _empty(first.needs, first.value_type)
    order = np.argsort(merged["keys"], kind="stable")
    merged = {name: array[order] for name, array in merged.items()}
    starts = _group_starts(merged["keys"])
    count_k = merged["count"]
    out = PartialStates(
        keys=merged["keys"][starts], count=np.add.reduceat(count_k, starts), value_type=first.value_type
    )
    if first.exact is not None:
        exact = _exact_of(merged)
        out.exact = exact.combine(_group_index(starts, len(count_k)), len(starts))
        out.sum = out.exact.values()
    elif first.sum is not None:
        out.sum, carry = _wide_sums(merged["sum"], starts)
        out.carry = carry + np.add.reduceat(merged["carry"], starts)
    if first.mean is not None:
        out.mean, out.m2 = _merge_moments(count_k, merged["mean"], merged["m2"], starts, out.count)
    text = first.value_type is not None and codec.is_text(numpy_dtype(first.value_type))
    for part, ufunc in (("min", np.minimum), ("max", np.maximum)):
        if getattr(first, part) is None:
            continue
        if text:  # partials that saw no value hold "" and take no part
            group_of = _group_index(starts, len(count_k))
            setattr(out, part, _text_extremes(merged[part], count_k > 0, group_of, len(starts), part))
        else:
            setattr(out, part, ufunc.reduceat(merged[part], starts))
    return out


def _merge_moments(
    count_k: np.ndarray, mean_k: np.ndarray, m2_k: np.ndarray, starts: np.ndarray, count: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Combine (n_k, mean_k, m2_k) of the partials of each group into the group's mean and m2."""
    weight = count_k.astype(np.float64)
    group = _group_index(starts, len(count_k))
    with np.errstate(invalid="ignore", over="ignore"):
        # Empty partials hold mean 0 and must not pull the group mean; weight 0 removes them.
        first = _safe_divide(np.add.reduceat(weight * mean_k, starts), count)
        deviation = np.where(count_k > 0, mean_k - first[group], 0.0)
        drift = np.add.reduceat(weight * deviation, starts)
        between = np.add.reduceat(weight * deviation * deviation, starts)
        mean = first + _safe_divide(drift, count)
        m2 = np.add.reduceat(m2_k, starts) + np.maximum(between - _safe_divide(drift * drift, count), 0.0)
    return mean, m2


# -- finishing -----------------------------------------------------------------------------------------


def finalize(states: PartialStates, function: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The value of aggregate ``function`` for every group, and a null mask (None when nothing is null).

    var is the sample variance m2 / (n - 1), null where n < 2; stdev is its square root. sum, avg,
    min and max are null where the group has no (non-null) value. Null positions hold 0 (false for
    bool) in the value array. Types follow :func:`arrayviews.model.aggregate_calls.output_type`.
    """
    function = canonical_function(function)
    missing = needs_for(function) - states.needs
    if missing:
        raise ValueError(f"{function} needs state parts {sorted(missing)} that these states do not hold")
    count = states.count
    if function == "count":
        return count.copy(), None
    if function in ("var", "stdev"):
        null = count < 2
        with np.errstate(invalid="ignore", divide="ignore"):
            result = np.where(null, 0.0, states.m2 / np.maximum(count - 1, 1))
        if function == "stdev":
            result = np.sqrt(result)
        return result, (null if null.any() else None)
    null = count == 0
    if function == "avg":
        result = _average(states, count)
    else:
        if function == "sum" and states.carry is not None:
            beyond = np.flatnonzero((states.carry != 0) & ~null)
            if len(beyond):
                raise SumOverflow(int(beyond[0]), _exact_total(states, int(beyond[0])))
        source = states.sum if function == "sum" else getattr(states, function)
        result = source.copy()
        if null.any():
            result[null] = "" if codec.is_text(result.dtype) else 0
    return result, (null if null.any() else None)


def _average(states: PartialStates, count: np.ndarray) -> np.ndarray:
    """``sum / count`` as float64 (0 where count is 0); an integer sum's mean is the float64
    nearest the exact quotient (kernels/exact_divide.py), even beyond 2**53 and for sums beyond
    int64 (whose mean is still a number, as Spark's avg of BIGINT is)."""
    total = states.sum
    if total.dtype.kind == "f":
        return _safe_divide(total, count)
    safe = np.maximum(count, 1)
    result = np.where(count > 0, int_quotient(total, safe), 0.0)
    wide = np.flatnonzero((states.carry != 0) & (count > 0))
    if len(wide):
        high = states.carry[wide] - (total[wide] < 0)
        result[wide] = wide_quotient(high, total[wide].view(np.uint64), safe[wide])
    return result


# -- serialization ---------------------------------------------------------------------------------------

_MAGIC = b"AVPS"
_VERSION = 1
_HEADER = struct.Struct("<4sBI")


def pack_states(states: PartialStates) -> bytes:
    """Serialize ``states`` to one bytes blob that :func:`unpack_states` reads back.

    Layout: the 4 bytes ``AVPS``, a format version byte, a little-endian uint32 header length, a UTF-8
    JSON header ``{"groups": n, "value_type": ..., "arrays": [[name, dtype], ...]}``, then the raw
    little-endian buffer of every listed array, in header order, with no padding. A string array is
    listed as ``[name, "utf8", bytes]`` and stored as int32 offsets then UTF-8 (storage/codec.py).
    """
    arrays = states.arrays()
    listing, payloads = [], []
    for name, array in arrays.items():
        if codec.is_text(array.dtype):  # strings: the chunk codec's layout, its length in the header
            payload = codec.text_bytes(array).tobytes()
            listing.append([name, "utf8", len(payload)])
        else:
            dtype = array.dtype.newbyteorder("<")
            payload = np.ascontiguousarray(array, dtype=dtype).tobytes()
            listing.append([name, dtype.str])
        payloads.append(payload)
    header = json.dumps({"groups": len(states), "value_type": states.value_type, "arrays": listing}).encode()
    return b"".join([_HEADER.pack(_MAGIC, _VERSION, len(header)), header, *payloads])


def unpack_states(blob: bytes) -> PartialStates:
    """Read back states written by :func:`pack_states` (arrays are native-endian copies)."""
    magic, version, header_length = _HEADER.unpack_from(blob, 0)
    if magic != _MAGIC or version != _VERSION:
        raise ValueError("not a packed partial-state blob of a known version")
    offset = _HEADER.size
    header = json.loads(bytes(blob[offset : offset + header_length]))
    offset += header_length
    groups = header["groups"]
    arrays: dict[str, np.ndarray] = {}
    for name, dtype_text, *length in header["arrays"]:
        if dtype_text == "utf8":
            arrays[name] = codec.text_values(np.frombuffer(blob, np.uint8, length[0], offset), groups)
            offset += length[0]
            continue
        dtype = np.dtype(dtype_text)
        array = np.frombuffer(blob, dtype=dtype, count=groups, offset=offset)
        arrays[name] = array.astype(dtype.newbyteorder("="))
        offset += groups * dtype.itemsize
    if offset != len(blob):
        raise ValueError(f"packed partial states have {len(blob) - offset} unexpected trailing bytes")
    exact = _exact_of(arrays)
    return PartialStates(value_type=header["value_type"], exact=exact, **arrays)
