"""Keeping each stream view's version history bounded: after a maintenance pass, a view holding
many more versions than it keeps forgets its oldest ones in one commit (only versions every view
reading it has seen), so its commits and loads stop growing with the stream's age.

Every maintenance step of a view commits a snapshot, and Iceberg's metadata file lists every
snapshot held: left alone, a view maintained once a minute carries a day's snapshots in every
commit (about 1.4 KB each, written and parsed again per commit and per fresh load). A view keeps
its newest ``keep`` versions (``arrayviews.viewdf.keep-versions``, 100 by default); once it holds
half as many again, the older ones are expired together, so the cost of expiry is paid once in
``keep // 2`` steps. Files only expired versions needed are deleted at once, found from the expired
versions' own manifests (storage/expiry.py ``expired_only_files``); files nothing names (left by a
writer killed before its commit) are swept by ``expire_versions``, which lists the view's folder
and deletes them after an hour's grace. Reading an expired version raises NotFoundError naming the
versions held.
Streams are left to ``Stream.expire_versions`` (their versions record the batches appended).
"""

from __future__ import annotations

import datetime as dt
import logging

from arrayviews.model.errors import ArrayViewsError
from arrayviews.model.faults import InjectedFault
from arrayviews.storage.expiry import cutoffs

logger = logging.getLogger(__name__)

KEEP_VERSIONS = "arrayviews.viewdf.keep-versions"
DEFAULT_KEEP_VERSIONS = 100
#: Files no snapshot names are deleted only when older than this (a writer may not have committed).
ORPHAN_GRACE = dt.timedelta(hours=1)


def keep_versions(properties: dict[str, str]) -> int:
    """How many of its newest versions a view keeps (its table properties)."""
    return int(properties.get(KEEP_VERSIONS, DEFAULT_KEEP_VERSIONS))


def bound_histories(world, names: list[str]) -> dict[str, list[int]]:
    """Expire the oldest versions of each view in ``names`` that holds more than one and a half
    times the versions it keeps; returns the versions expired per view. A view whose expiry fails
    (another process committed meanwhile, say) is left for a later pass: expiry never fails a
    maintenance pass."""
    expired: dict[str, list[int]] = {}
    for name in names:
        table = world.table(name)
        keep = keep_versions(table.properties)
        held = len(table.table.metadata.snapshots)
        if held <= keep + max(keep // 2, 1):
            continue
        newest = table.current_version()
        keep_after = newest - keep
        seen = world.oldest_seen(name)
        if seen is not None:
            keep_after = min(keep_after, seen)
        try:
            # only what the forgotten versions referenced: the whole folder is swept by the
            # user's expire_versions (a step should not list every file the view holds)
            result = table.expire(*cutoffs(None, ORPHAN_GRACE), keep_after=keep_after, sweep_orphans=False)
        except InjectedFault:
            raise
        except (ArrayViewsError, OSError) as error:
            logger.info("view %s: expiry of old versions left for a later pass: %s", name, error)
            world.forget(name)
            continue
        if result.versions:
            expired[name] = result.versions
    return expired


__all__ = ["DEFAULT_KEEP_VERSIONS", "KEEP_VERSIONS", "bound_histories", "keep_versions"]
