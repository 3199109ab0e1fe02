"""One update step of a sliding-window view's one table (streams/windows.py, incremental plan) in
numpy over Arrow columns: what the step's SQL computes, without a query plan's fixed cost.

Given the stream's new part S[j], the view's part j-1 (``previous``) and its part j-Wp (``old``),
the step (paper 004, sections 5.2.1 and 5.2.2, as streams/windows.py spells them in SQL):

1. groups S[j] (``ct`` rows, sums and non-null counts, each queue's extreme: the batch);
2. joins it, full outer, with part j-1's state per group (the MAX of each state column over the
   group's rows; per queue the extreme of the entries still in the window at j): a group's ``age``
   grows by one (1 for a new group), ``idle`` is 0 with a batch row and one more without, the
   cumulative columns add; a group idle for Wp parts is dropped;
3. subtracts the cumulative columns of part j-Wp's summary row of the same epoch (its ``age`` is
   exactly ``age - Wp``) to get the window's totals, and each queue's head (the batch's extreme or
   the earlier entries', whichever is kept ahead);
4. writes one summary row per group (the state, the query's values, the batch's extreme as the
   newest queue entry) and each queue's earlier entries still in the window that the batch's
   extreme does not beat: as a list in the row, oldest first (views made since round 36:
   :class:`_Candidates`), or, for earlier views, every row of part j-1 as an entry row made at
   ``coalesce(at, age)`` (streams/entry_rows.py).

Group keys match as SQL's ``IS NOT DISTINCT FROM`` (NULL is a key). Anything the kernel cannot
compute exactly as Spark does (float or nested keys, non-integer sums, float extremes, a sum that
would leave BIGINT, a state that is not one summary row per group) raises :class:`StepRefused`,
and the caller runs the SQL instead.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from arrayviews.model.window_step import WindowStep

_LIMIT = 2**62  # products of key cardinalities and bounds of sums kept below this


class StepRefused(Exception):
    """The kernel cannot compute this step with Spark's meaning; run the SQL."""


def _key_type_ok(kind: pa.DataType) -> bool:
    return (
        pa.types.is_integer(kind)
        or pa.types.is_string(kind)
        or pa.types.is_large_string(kind)
        or pa.types.is_boolean(kind)
        or pa.types.is_date(kind)
        or pa.types.is_timestamp(kind)
    )


def _dense(ids: np.ndarray) -> tuple[np.ndarray, int]:
    """``ids`` renumbered 0 .. n-1 (n distinct values), by hashing."""
    encoded = pc.dictionary_encode(pa.array(ids, type=pa.int64()))
    return encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64), len(encoded.dictionary)


def group_ids(columns: list[pa.ChunkedArray | pa.Array]) -> tuple[np.ndarray, int]:
    """One group number per row of the key ``columns`` (equal keys, NULL included, share a number)
    and a bound of the numbers (below a few times the rows, or the number of groups)."""
    ids, size, _ = encoded_groups(columns)
    return ids, size


def encoded_groups(
    columns: list[pa.ChunkedArray | pa.Array],
) -> tuple[np.ndarray, int, list[tuple[pa.Array, np.ndarray]] | None]:
    """:func:`group_ids`, and each key column as its dictionary (NULL a member) with every row's
    place in it (None without rows), from which rows' keys are taken without touching the long
    column: taking from a column of several chunks copies them all into one first."""
    rows = len(columns[0]) if columns else 0
    ids = np.zeros(rows, dtype=np.int64)
    size = 1
    if not rows:  # Arrow gives no numbers for an empty dictionary of dates or timestamps
        return ids, size, None
    dictionaries = []
    for column in columns:
        encoded = pc.dictionary_encode(column, null_encoding="encode")
        if isinstance(encoded, pa.ChunkedArray):
            encoded = encoded.combine_chunks()
        codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        dictionaries.append((encoded.dictionary, codes))
        cardinality = max(1, len(encoded.dictionary))
        if size * cardinality >= _LIMIT:
            ids, size = _dense(ids)
        ids = ids * cardinality + codes
        size *= cardinality
    if len(columns) == 1 or not rows or size <= 4 * rows + 1024:  # few numbers unused: not renumbered
        return ids, size, dictionaries
    ids, size = _dense(ids)
    return ids, size, dictionaries


class _Groups:
    """Rows' group numbers (``ids``, below ``total``) and reductions of value columns per group, as
    arrays over every group number: scattered (np.bincount, ufunc.at), never sorted."""

    def __init__(self, ids: np.ndarray, total: int) -> None:
        self.ids, self.total = ids, total
        self.sizes = np.bincount(ids, minlength=total)
        self.unique = not len(ids) or int(self.sizes.max()) <= 1  # one row per group at most

    def present(self) -> np.ndarray:
        return self.sizes > 0

    def count(self, valid: np.ndarray) -> np.ndarray:
        """Rows per group where ``valid``."""
        return self.sizes if valid.all() else np.bincount(self.ids[valid], minlength=self.total)

    def sum(self, values: np.ndarray) -> np.ndarray:
        out = np.zeros(self.total, dtype=np.int64)
        np.add.at(out, self.ids, values)
        return out

    def extreme(self, values: np.ndarray, valid: np.ndarray, function: str) -> tuple[np.ndarray, np.ndarray]:
        """Per group the max (or min) of ``values`` where ``valid``; and whether there was one."""
        has = self.count(valid) > 0
        info = np.iinfo(values.dtype)
        filler = info.min if function == "max" else info.max
        masked = values if valid.all() else np.where(valid, values, filler)
        out = np.full(self.total, filler, dtype=values.dtype)
        if self.unique:
            out[self.ids] = masked
        else:
            (np.maximum if function == "max" else np.minimum).at(out, self.ids, masked)
        return out, has


def _column(table: pa.Table, name: str) -> pa.ChunkedArray:
    index = table.schema.get_field_index(name)
    if index < 0:
        lowered = [n.lower() for n in table.column_names]
        if name.lower() not in lowered:
            raise StepRefused(f"no column {name}")
        index = lowered.index(name.lower())
    return table.column(index)


def _numbers(column: pa.ChunkedArray | pa.Array, what: str) -> tuple[np.ndarray, np.ndarray]:
    """An integer, date or timestamp column (or a DECIMAL(p, 0) one that fits int64) as int64 values
    (0 where NULL) and its validity."""
    kind = column.type
    if pa.types.is_timestamp(kind) or pa.types.is_date64(kind):
        dtype = np.dtype(np.int64)
    elif pa.types.is_date32(kind):
        dtype = np.dtype(np.int32)
    elif pa.types.is_integer(kind) and kind != pa.uint64():
        dtype = np.dtype(kind.to_pandas_dtype())
    elif pa.types.is_decimal(kind) and kind.scale == 0:  # a wide sum: an int64 or an Arrow error
        column, dtype = column.cast(pa.int64()), np.dtype(np.int64)
    else:
        raise StepRefused(f"{what} is {kind}")
    if isinstance(column, pa.ChunkedArray):
        column = column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    rows = len(column)
    data = column.buffers()[1]
    if not rows or data is None:
        values = np.zeros(rows, dtype=np.int64)
    else:
        values = np.frombuffer(data, dtype=dtype, count=rows, offset=column.offset * dtype.itemsize)
        values = values.astype(np.int64)
    if column.null_count == 0:
        return values, np.ones(rows, dtype=bool)
    valid = column.is_valid().to_numpy(zero_copy_only=False)
    values[~valid] = 0
    return values, valid


def _arrow(values: np.ndarray, valid: np.ndarray | None, kind: pa.DataType) -> pa.Array:
    """Int64 ``values`` as a column of ``kind``, NULL where not ``valid``; a valid value ``kind``
    cannot hold raises an Arrow error (a refusal), never wraps."""
    mask = None if valid is None or valid.all() else ~valid
    if kind == pa.int64():
        return pa.array(values, type=kind, mask=mask)
    narrow = pa.int32() if pa.types.is_date32(kind) else kind  # Arrow makes a date32 of int32 only
    if pa.types.is_integer(narrow):
        dtype = np.dtype(narrow.to_pandas_dtype())
        kept = values if mask is None else np.where(mask, 0, values)
        info = np.iinfo(dtype)
        if not len(kept) or (info.min <= kept.min() and kept.max() <= info.max):
            array = pa.array(kept.astype(dtype), type=narrow, mask=mask)
            return array if narrow == kind else array.cast(kind)
    return pa.array(values, type=pa.int64(), mask=mask).cast(kind)


def _beats(function: str, value: np.ndarray, other: np.ndarray) -> np.ndarray:
    return value > other if function == "max" else value < other


def _bounded(*columns: np.ndarray) -> None:
    """Refuse when adding or subtracting these int64 columns could leave BIGINT."""
    if sum(int(np.abs(c).max()) if len(c) else 0 for c in columns) >= _LIMIT:
        raise StepRefused("a cumulative sum near the end of BIGINT")


class _Candidates:
    """(Queues as lists, round 36.) One queue's entries made before part j, in the order the step's
    SQL lists them: per row of part j-1, its kept entries (oldest first), then its batch's extreme
    (made at the row's age); each with its value, the age it was made at, the row it came from, and
    whether it is still in the window at j (``age + 1 - at < Wp``)."""

    def __init__(self, values: np.ndarray, made: np.ndarray, row: np.ndarray, stays: np.ndarray) -> None:
        self.values, self.made, self.row, self.stays = values, made, row, stays

    @classmethod
    def of(cls, previous: pa.Table, queue, age: np.ndarray, age_valid: np.ndarray, parts: int) -> _Candidates:
        rows = previous.num_rows
        lists = _column(previous, queue.entries)
        lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
        if not pa.types.is_list(lists.type) or not pa.types.is_struct(lists.type.value_type):
            raise StepRefused(f"{queue.entries} is {lists.type}")
        # a NULL list has no entries (as the SQL's CASE); flatten() skips what a NULL slot covers
        lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False).astype(np.int64)
        flat = lists.flatten()
        fields = dict(zip([f.name for f in flat.type], flat.flatten(), strict=True))
        if set(fields) != {"v", "at"}:
            raise StepRefused(f"{queue.entries} is {lists.type}")
        listed, listed_valid = _numbers(fields["v"], queue.entries)
        listed_made, listed_made_valid = _numbers(fields["at"], queue.entries)
        newest, newest_valid = _numbers(_column(previous, queue.entry), queue.entry)
        parent = np.repeat(np.arange(rows, dtype=np.int64), lengths)
        ends = np.cumsum(lengths)
        at_listed = np.arange(len(parent), dtype=np.int64) + parent  # after the rows before it
        at_newest = ends + np.arange(rows, dtype=np.int64)  # after its row's list
        size = len(parent) + rows
        values = np.zeros(size, dtype=newest.dtype)
        made = np.zeros(size, dtype=np.int64)
        row = np.zeros(size, dtype=np.int64)
        valid = np.zeros(size, dtype=bool)
        values[at_listed], values[at_newest] = listed, newest
        made[at_listed], made[at_newest] = listed_made, age
        row[at_listed], row[at_newest] = parent, np.arange(rows)
        valid[at_listed] = listed_valid & listed_made_valid
        valid[at_newest] = newest_valid & age_valid
        stays = valid & age_valid[row] & (age[row] + 1 - made < parts)
        return cls(values, made, row, stays)

    def listed(self, keep: np.ndarray, place: np.ndarray, kind: pa.DataType, rows: int) -> pa.Array:
        """The entries where ``keep`` as one list for each of ``rows`` output rows (``place``: each
        entry's row there; a kept entry has one), in this order within a row."""
        taken = np.flatnonzero(keep)
        places = place[taken]
        order = np.argsort(places, kind="stable")
        taken, places = taken[order], places[order]
        counts = np.bincount(places, minlength=rows)
        offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
        entries = pa.StructArray.from_arrays(
            [_arrow(self.values[taken], None, kind), _arrow(self.made[taken], None, pa.int32())],
            names=["v", "at"],
        )
        return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), entries)


def window_step(step: WindowStep, batch: pa.Table, previous: pa.Table, old: pa.Table | None) -> pa.Table:
    """Part j of the window view: its summary rows (and queue entries) as the step's SQL makes them,
    one column per stored column (``_part`` not included). Raises StepRefused, also where Arrow
    cannot do what the step needs (a type it does not cast, a value past its column's type): the
    step's SQL then decides, never a failed view."""
    try:
        return _step(step, batch, previous, old)
    except pa.ArrowException as error:
        raise StepRefused(f"arrow: {str(error).splitlines()[0][:200]}") from None


def _step(step: WindowStep, batch: pa.Table, previous: pa.Table, old: pa.Table | None) -> pa.Table:
    for attribute, column in step.sums:  # refused before any work: the SQL runs at every step then
        kind = _column(batch, attribute).type
        wide = column in step.wide  # a BIGINT column's sums, kept as DECIMAL(38,0)
        if (
            not pa.types.is_integer(kind)
            or kind in (pa.uint32(), pa.uint64())
            or (kind == pa.int64()) != wide
        ):
            raise StepRefused(f"sum of {attribute} ({kind})")
    for q in step.queues:
        kind = _column(batch, q.attribute).type
        if not (pa.types.is_integer(kind) or pa.types.is_date(kind) or pa.types.is_timestamp(kind)):
            raise StepRefused(f"{q.function} of {q.attribute} ({kind})")
    groups = list(step.groups)
    tables = [batch, previous] + ([old] if old is not None else [])
    keys = []
    for name in groups:
        pieces = [_column(t, name) for t in tables]
        kind = pieces[0].type
        if not _key_type_ok(kind) or any(p.type != kind for p in pieces):
            raise StepRefused(f"group column {name} of type {kind}")
        keys.append(pa.chunked_array([c for p in pieces for c in p.chunks], type=kind))
    bounds = np.cumsum([0] + [t.num_rows for t in tables])
    dictionaries = None
    if groups:
        ids, total, dictionaries = encoded_groups(keys)
    else:  # one group: the whole window
        ids, total = np.zeros(int(bounds[-1]), dtype=np.int64), 1
    first = np.full(total, -1, dtype=np.int64)
    first[ids[::-1]] = np.arange(len(ids) - 1, -1, -1)
    batch_ids, previous_ids = ids[bounds[0] : bounds[1]], ids[bounds[1] : bounds[2]]
    old_ids = ids[bounds[2] : bounds[3]] if old is not None else None

    # 1. the batch per group
    by_batch = _Groups(batch_ids, total)
    in_batch = by_batch.present()
    batch_cumulated: dict[str, np.ndarray] = {step.count: by_batch.sizes.astype(np.int64)}
    for attribute, column in step.sums:
        values, _ = _numbers(_column(batch, attribute), f"column {attribute}")  # 0 where NULL
        if column in step.wide and len(values):  # BIGINT values: their sums must stay in int64
            largest = max(abs(int(values.max())), abs(int(values.min())))
            if largest * int(by_batch.sizes.max()) >= _LIMIT:
                raise StepRefused(f"sums of {attribute} near the end of BIGINT")
        batch_cumulated[column] = by_batch.sum(values)
    for attribute, column in step.counts:
        array = _column(batch, attribute)
        valid = (
            np.ones(len(array), dtype=bool)
            if array.null_count == 0
            else array.is_valid().to_numpy(zero_copy_only=False)
        )
        batch_cumulated[column] = by_batch.count(valid).astype(np.int64)
    batch_heads = {}
    value_types = {}
    for q in step.queues:
        column_of = _column(batch, q.attribute)
        value_types[q.entry] = column_of.type
        values, valid = _numbers(column_of, f"column {q.attribute}")
        batch_heads[q.entry] = by_batch.extreme(values, valid, q.function)

    # 2. part j-1's state per group, joined with the batch
    by_previous = _Groups(previous_ids, total)
    in_previous = by_previous.present()
    age_values, age_valid = _numbers(_column(previous, step.age), "age")
    previous_age, has_age = by_previous.extreme(age_values, age_valid, "max")
    idle_values, idle_valid = _numbers(_column(previous, step.idle), "idle")
    previous_idle, has_idle = by_previous.extreme(idle_values, idle_valid, "max")
    nested = bool(step.queues) and all(q.entries for q in step.queues)
    if step.queues and not nested and any(q.entries for q in step.queues):
        raise StepRefused("queues of two layouts")
    if step.queues and not nested and not by_previous.unique and np.any(by_previous.count(idle_valid) > 1):
        raise StepRefused("a group with two summary rows")
    if (nested or not step.queues) and not by_previous.unique:
        raise StepRefused("a group with two rows")
    cumulated = {}
    for column in step.cumulated():
        values, valid = _numbers(_column(previous, column), column)
        before, has = by_previous.extreme(values, valid, "max")
        before = np.where(has, before, 0)
        _bounded(before, batch_cumulated[column])
        cumulated[column] = before + batch_cumulated[column]
    earlier, queued = {}, {}  # per queue: the extreme of the entries still in the window; entries
    candidates: dict[str, _Candidates] = {}
    if nested:
        for q in step.queues:
            found = candidates[q.entry] = _Candidates.of(previous, q, age_values, age_valid, step.parts)
            group = previous_ids[found.row]
            earlier[q.entry] = _Groups(group, total).extreme(found.values, found.stays, q.function)
    elif step.queues:
        at_values, at_valid = _numbers(_column(previous, step.at), "at")
        made = np.where(at_valid, at_values, age_values)
        stays = age_valid & (age_values + 1 - made < step.parts)
        for q in step.queues:
            queued[q.entry] = values, valid = _numbers(_column(previous, q.entry), q.entry)
            earlier[q.entry] = by_previous.extreme(values, valid & stays, q.function)
    age = np.where(has_age, previous_age + 1, 1)
    idle = np.where(in_batch, 0, previous_idle + 1)
    idle_known = in_batch | has_idle
    kept = (in_batch | in_previous) & idle_known & (idle < step.parts)

    # 3. the window's totals: less the same epoch's summary row Wp parts back
    totals = dict(cumulated)
    if old is not None and step.cumulated():
        old_age, old_age_valid = _numbers(_column(old, step.age), "age")
        summary = old_age_valid
        if step.queues:
            summary = summary & _column(old, step.idle).is_valid().to_numpy(zero_copy_only=False)
        same_epoch = summary & (old_age == age[old_ids] - step.parts) & kept[old_ids]
        rows_of = old_ids[same_epoch]
        if len(rows_of) and np.bincount(rows_of, minlength=total).max() > 1:
            raise StepRefused("two rows of one epoch Wp parts back")
        for column in step.cumulated():
            values, _ = _numbers(_column(old, column), column)  # 0 where NULL
            subtracted = np.zeros(total, dtype=np.int64)
            subtracted[rows_of] = values[same_epoch]
            _bounded(cumulated[column], subtracted)
            totals[column] = cumulated[column] - subtracted
    heads = {}
    for q in step.queues:
        batch_value, batch_has = batch_heads[q.entry]
        earlier_value, earlier_has = earlier[q.entry]
        take_earlier = earlier_has & (~batch_has | _beats(q.function, earlier_value, batch_value))
        heads[q.entry] = (np.where(take_earlier, earlier_value, batch_value), earlier_has | batch_has)

    # 4. the summary rows, then the queue entries
    chosen = np.flatnonzero(kept)
    entry_rows = np.zeros(0, dtype=np.int64)
    entry_group = np.zeros(0, dtype=np.int64)
    if step.queues and not nested:
        at_entry = made
        group_of = previous_ids
        alive = kept[group_of] & (at_valid | age_valid) & (age[group_of] - at_entry < step.parts)
        entries = {}
        some = np.zeros(len(group_of), dtype=bool)
        for q in step.queues:
            values, valid = queued[q.entry]
            batch_value, batch_has = batch_heads[q.entry]
            stays_ahead = valid & (~batch_has[group_of] | _beats(q.function, values, batch_value[group_of]))
            entries[q.entry] = (values, stays_ahead)
            some |= stays_ahead
        entry_rows = np.flatnonzero(alive & some)
        entry_group = group_of[entry_rows]
    summaries, rows = len(chosen), len(chosen) + len(entry_rows)

    def summary_only(values: np.ndarray) -> np.ndarray:
        """``values`` of the summary rows, then 0 (or False) for each queue entry."""
        out = np.zeros(rows, dtype=values.dtype)
        out[:summaries] = values
        return out

    summary_valid = summary_only(np.ones(summaries, dtype=bool))
    all_groups = np.concatenate([chosen, entry_group])
    columns: dict[str, pa.Array] = {}
    taken = first[all_groups]
    for number, (name, key) in enumerate(zip(groups, keys, strict=True)):
        if dictionaries is None:
            columns[name] = key.take(pa.array(taken))
        else:  # from the key's dictionary (NULL included), by the rows' places in it
            dictionary, codes = dictionaries[number]
            columns[name] = dictionary.take(pa.array(codes[taken]))
    columns[step.age] = _arrow(age[all_groups], None, pa.int32())
    columns[step.idle] = _arrow(summary_only(idle[chosen]), summary_valid, pa.int32())
    for column in step.cumulated():
        columns[column] = _arrow(summary_only(cumulated[column][chosen]), summary_valid, pa.int64())
    sums = dict(step.sums)
    counts = dict(step.counts)
    for item in step.items:
        if item.function == "count":
            name = step.count if item.attribute is None else counts[item.attribute]
            columns[item.stored] = _arrow(summary_only(totals[name][chosen]), summary_valid, pa.int64())
        elif item.function in ("sum", "avg"):
            present = totals[counts[item.attribute]][chosen]
            total = totals[sums[item.attribute]][chosen]
            valid = summary_only(present > 0)
            if item.function == "sum":
                columns[item.stored] = _arrow(summary_only(total), valid, pa.int64())
            else:
                mean = summary_only(total.astype(np.float64) / np.maximum(present, 1).astype(np.float64))
                columns[item.stored] = pa.array(mean, type=pa.float64(), mask=~valid)
        else:
            entry = next(
                q.entry for q in step.queues if (q.function, q.attribute) == (item.function, item.attribute)
            )
            value, has = heads[entry]
            columns[item.stored] = _arrow(
                summary_only(value[chosen]), summary_only(has[chosen]), value_types[entry]
            )
    if nested:
        place = np.full(len(kept), -1, dtype=np.int64)  # per group number: its output row
        place[chosen] = np.arange(len(chosen))
        for q in step.queues:
            batch_value, batch_has = batch_heads[q.entry]
            columns[q.entry] = _arrow(batch_value[chosen], batch_has[chosen], value_types[q.entry])
            found = candidates[q.entry]
            group = previous_ids[found.row]
            ahead = ~batch_has[group] | _beats(q.function, found.values, batch_value[group])
            keep = found.stays & kept[group] & ahead
            columns[q.entries] = found.listed(keep, place[group], value_types[q.entry], len(chosen))
    elif step.queues:
        columns[step.at] = _arrow(
            np.concatenate([np.zeros(summaries, np.int64), at_entry[entry_rows]]), ~summary_valid, pa.int32()
        )
        for q in step.queues:
            batch_value, batch_has = batch_heads[q.entry]
            values, stays_ahead = entries[q.entry]
            columns[q.entry] = _arrow(
                np.concatenate([batch_value[chosen], values[entry_rows]]),
                np.concatenate([batch_has[chosen], stays_ahead[entry_rows]]),
                value_types[q.entry],
            )
    assert all(len(c) == rows for c in columns.values())
    return pa.table(columns)
