"""Reads with coverage: versioned results, the result catalog, explicit reads and three limits.

Owns what the model can know about what it received. The law: a result kept for reading is an
immutable version (a refresh makes a new one; an exact-version read never refetches); every read
reports what actually happened (`requested`, `loaded`, `total`, `range`, `hasMore`,
`byteComplete`, `filteredCount`, `inputComplete`, `reason`, missing and duplicated ids); a record
is delivered whole or not at all; storage, automatic insertion and explicit reads are three
separately configured limits, and "not inserted automatically" never means "cannot be read".
The `read_result` tool itself lives in `byref.tools.readers.read_result` (tools sit above reads).
"""

from byref.reads.catalog import CATALOG_HEAD, CatalogEntry, ResultCatalog, fit_lines
from byref.reads.coverage import Coverage, Expected, Gap, Item, Selection, select
from byref.reads.limits import (
    AUTO_INSERT_BYTES,
    EXPLICIT_READ_BYTES,
    EXPLICIT_READ_ENTRIES,
    STORAGE_BYTES,
    ReadBudget,
    ReadLimits,
    ReadRoom,
    read_budget,
)
from byref.reads.read import Source, note, read
from byref.reads.shape import Shape, describe, json_lines_items, records_of
from byref.reads.versions import (
    META_KEY,
    Refreshed,
    ResultVersion,
    ResultVersionError,
    ResultVersions,
    series_key,
)

__all__ = [
    "AUTO_INSERT_BYTES", "CATALOG_HEAD", "EXPLICIT_READ_BYTES", "EXPLICIT_READ_ENTRIES",
    "META_KEY", "STORAGE_BYTES", "CatalogEntry", "Coverage", "Expected", "Gap", "Item",
    "ReadBudget", "ReadLimits", "ReadRoom", "Refreshed", "ResultCatalog", "ResultVersion",
    "ResultVersionError", "ResultVersions", "Selection", "Shape", "Source", "describe",
    "fit_lines", "json_lines_items", "note", "read", "read_budget",
    "records_of", "select", "series_key",
]
