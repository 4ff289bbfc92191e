"""Decode each camera video of a training dataset once, front to back, instead of once per item.

LeRobot's reader answers every item's camera frames by seeking to the keyframe before them and
decoding forward. With PyAV (simroll's decoder where torchcodec's FFmpeg libraries do not load)
that costs about 25 ms per frame on the 2-core machines, so the first epoch over a 64 px
two-camera dataset of 25k frames took about 25 minutes, where decoding each video file in order
takes seconds. :func:`cache_videos` swaps the reader's video query for lookups in frames decoded
once per file, with LeRobot's own rule (the frame nearest each queried timestamp, which must lie
within the dataset's tolerance, else LeRobot's ``FrameTimestampError``); items come out equal to
the uncached reader's. Camera streams listed in ``skip`` (ones the policy does not read) are not
decoded at all. Depth streams, and readers of other LeRobot versions or decoders, keep LeRobot's
path.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch


class DecodedVideos:
    """Every frame of each video file asked for, decoded once with PyAV, as uint8 (N, C, H, W)
    with its presentation time in seconds."""

    def __init__(self) -> None:
        self.files: dict[Path, tuple[torch.Tensor, torch.Tensor]] = {}

    def frames(self, path: Path) -> tuple[torch.Tensor, torch.Tensor]:
        if path not in self.files:
            import av

            times: list[float] = []
            frames: list[np.ndarray] = []
            with av.open(str(path)) as container:
                stream = container.streams.video[0]
                stream.thread_type = "AUTO"
                for frame in container.decode(stream):
                    if frame.pts is None:
                        continue
                    times.append(float(frame.pts * stream.time_base))
                    frames.append(frame.to_ndarray(format="rgb24"))
            if not frames:
                raise ValueError(f"{path}: no video frames could be decoded")
            stacked = torch.from_numpy(np.stack(frames)).permute(0, 3, 1, 2).contiguous()
            self.files[path] = (torch.tensor(times, dtype=torch.float64), stacked)
        return self.files[path]

    def query(
        self, path: Path, timestamps: list[float], tolerance_s: float, return_uint8: bool
    ) -> torch.Tensor:
        """The frames nearest ``timestamps`` (seconds in the file), as LeRobot's PyAV decoder
        returns them: (len(timestamps), C, H, W), float32 in [0, 1] unless ``return_uint8``."""
        from lerobot.datasets.video_utils import FrameTimestampError

        times, frames = self.frames(path)
        query = torch.tensor(timestamps, dtype=torch.float64)
        after = torch.searchsorted(times, query).clamp(1, len(times) - 1)
        before = after - 1
        nearest = torch.where(
            (query - times[before]).abs() <= (times[after] - query).abs(), before, after
        )
        if len(times) == 1:
            nearest = torch.zeros_like(nearest)
        distance = (times[nearest] - query).abs()
        if not bool((distance < tolerance_s).all()):
            raise FrameTimestampError(
                f"{path}: queried timestamps {timestamps} are {distance.tolist()} s from the "
                f"nearest frames, beyond the tolerance of {tolerance_s} s"
            )
        chosen = frames[nearest]
        return chosen if return_uint8 else chosen.to(torch.float32) / 255.0


def cache_videos(dataset: Any, skip: Iterable[str] = ()) -> DecodedVideos | None:
    """Make ``dataset`` (a ``LeRobotDataset`` opened with the PyAV decoder) read its camera
    frames from a :class:`DecodedVideos`; streams in ``skip`` come back as empty tensors (drop
    them before use). Returns the cache, or None where the reader is not one this module knows
    (it is then left as it was)."""
    if not dataset.meta.video_keys or not hasattr(dataset, "_ensure_reader"):
        return None
    reader = dataset._ensure_reader()
    needed = ("_query_videos", "_meta", "_tolerance_s", "_return_uint8", "_video_backend", "root")
    if not all(hasattr(reader, name) for name in needed):
        return None
    if reader._video_backend not in ("pyav", "video_reader"):  # torchcodec seeks accurately
        return None
    cache = DecodedVideos()
    original = reader._query_videos
    skipped = frozenset(skip)
    meta = reader._meta

    def query_videos(query_timestamps: dict[str, list[float]], ep_idx: int):
        episode = meta.episodes[ep_idx]
        result: dict[str, torch.Tensor] = {}
        elsewhere: dict[str, list[float]] = {}
        for key, timestamps in query_timestamps.items():
            if key in skipped:
                result[key] = torch.empty(0)
            elif key in meta.depth_keys:
                elsewhere[key] = timestamps
            else:
                start = episode[f"videos/{key}/from_timestamp"]
                path = Path(reader.root) / meta.get_video_file_path(ep_idx, key)
                frames = cache.query(
                    path,
                    [start + t for t in timestamps],
                    reader._tolerance_s,
                    reader._return_uint8,
                )
                result[key] = frames.squeeze(0)
        if elsewhere:
            result.update(original(elsewhere, ep_idx))
        return result

    reader._query_videos = query_videos
    return cache
