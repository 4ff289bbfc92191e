"""Answer a training dataset's per-item table queries from columns loaded once, instead of from
the Arrow table on every item.

LeRobot's reader builds each item with about ten lookups in its Hugging Face table: the row, then
one per delta-timestamp key (the action chunk, each observation's history) and the timestamps of
every camera's frames. Each lookup builds a new ``datasets.Dataset`` view and deep-copies its
feature schema: several milliseconds per item on the 2-core machines, most of a first epoch's
time on a state dataset (later epochs read :class:`simroll.train.trainer.MemoizedDataset`'s kept
items). :func:`cache_columns` loads the queried columns into tensors once and swaps the reader's
queries for indexing into them, and its episode-bound lookups for a table of the episodes' index
ranges; items come out equal to the uncached reader's (``tests/train/test_table_cache.py`` checks
every frame). Readers of other LeRobot versions keep LeRobot's path.
"""

from __future__ import annotations

from typing import Any

import torch


class LoadedColumns:
    """Columns of a LeRobot reader's table, each stacked once into a tensor as LeRobot's own
    query stacks the rows it asks for."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.columns: dict[str, torch.Tensor] = {}

    def column(self, key: str) -> torch.Tensor:
        if key not in self.columns:
            self.columns[key] = torch.stack(list(self.table[key]))
        return self.columns[key]


def cache_columns(dataset: Any) -> LoadedColumns | None:
    """Make ``dataset`` (a ``LeRobotDataset`` with delta timestamps) answer its history, chunk
    and camera-timestamp queries from a :class:`LoadedColumns`. Returns the cache, or None where
    the reader is not one this module knows or the dataset has no delta timestamps (it is then
    left as it was)."""
    if not hasattr(dataset, "_ensure_reader"):
        return None
    reader = dataset._ensure_reader()
    needed = (
        "_query_hf_dataset",
        "_get_query_timestamps",
        "_get_query_indices",
        "_absolute_to_relative_idx",
        "_meta",
        "hf_dataset",
        "delta_indices",
    )
    if not all(hasattr(reader, name) for name in needed) or reader.delta_indices is None:
        return None
    if reader.hf_dataset is None:
        return None
    cache = LoadedColumns(reader.hf_dataset)
    meta = reader._meta
    video_keys = frozenset(meta.video_keys)
    # row ep_idx of the episodes table -> (first, one past the last) absolute frame index, as
    # LeRobot's ``_get_query_indices`` reads it
    bounds = list(
        zip(
            map(int, meta.episodes["dataset_from_index"]),
            map(int, meta.episodes["dataset_to_index"]),
            strict=True,
        )
    )

    def relative(indices: list[int]) -> list[int]:
        mapping = reader._absolute_to_relative_idx
        return indices if mapping is None else [mapping[index] for index in indices]

    def query_indices(abs_idx: int, ep_idx: int):
        start, end = bounds[ep_idx]
        indices = {
            key: [max(start, min(end - 1, abs_idx + delta)) for delta in deltas]
            for key, deltas in reader.delta_indices.items()
        }
        padding = {
            f"{key}_is_pad": torch.BoolTensor(
                [(abs_idx + delta < start) | (abs_idx + delta >= end) for delta in deltas]
            )
            for key, deltas in reader.delta_indices.items()
        }
        return indices, padding

    def query_table(indices: dict[str, list[int]]) -> dict[str, torch.Tensor]:
        return {
            key: cache.column(key)[relative(rows)]
            for key, rows in indices.items()
            if key not in video_keys
        }

    def query_timestamps(current_ts: float, indices: dict[str, list[int]] | None = None):
        result: dict[str, list[float]] = {}
        for key in meta.video_keys:
            if indices is not None and key in indices:
                result[key] = cache.column("timestamp")[relative(indices[key])].tolist()
            else:
                result[key] = [current_ts]
        return result

    reader._get_query_indices = query_indices
    reader._query_hf_dataset = query_table
    reader._get_query_timestamps = query_timestamps
    return cache
