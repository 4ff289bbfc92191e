"""Episode videos: scene camera with a tactile inset and a deformation readout, H.264 mp4.

:class:`EpisodeVideos` is an observer factory for :class:`~simroll.rollout.backends.EpisodeJob`:
the episodes whose spec keys it was given get a :class:`VideoObserver`, which renders the scene
camera with its own renderer (``mujoco.Renderer``, created at the episode's reset, after any
fork, and closed at its end; the env itself needs no ``render_mode``) while the scored episode
runs, in whatever worker runs it. Each frame shows the scene camera, both fingers' pressure maps
in the corner, and a text line with the step, the current and peak normalized deformation against
the object's tolerance, and the success flag: one frame per control step, also inside a macro
step (a clutter primitive's wrapper calls its ``low_level_observers``). When the episode ends
without error its frames are written as a browser-playable mp4 (H.264, yuv420p) through PyAV,
named by the spec key (:func:`video_name`), written to a temporary file and renamed, with the
episode record's receipt and spec key in the container metadata (``simroll_receipt``,
``simroll_spec``; read back by :func:`video_receipt`), so a video can be matched to the record it
shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import cv2
import gymnasium as gym
import numpy as np

from simroll.envs.core import CONTROL_HZ
from simroll.envs.sensing import CameraRig
from simroll.features import tactile_to_rgb
from simroll.io import atomic_path
from simroll.rollout.episode import EpisodeObserver
from simroll.rollout.records import EpisodeRecord, EpisodeSpec

RECEIPT_TAG = "simroll_receipt"
SPEC_TAG = "simroll_spec"
DEFAULT_SIZE = (240, 320)  # (height, width), as configs/eval.yaml's video.size


def compose_frame(
    scene: np.ndarray, tactile_force: np.ndarray, info: dict, step: int
) -> np.ndarray:
    frame = scene.copy()
    # The tactile inset at the largest scale that fits the frame with a 4-pixel margin (one
    # pixel per taxel at the smallest); a frame too small for even that shows no inset.
    for size in (48, 32, 16):
        inset = tactile_to_rgb(tactile_force, size=size)
        h, w = inset.shape[:2]
        if h + 8 <= frame.shape[0] and w + 8 <= frame.shape[1]:
            frame[4 : 4 + h, -w - 4 : -4] = inset
            break
    evaluation = info.get("eval", {})
    deformation = evaluation.get("deformation", 0.0)
    peak = evaluation.get("peak_deformation", 0.0)
    tolerance = evaluation.get("tolerance", float("nan"))
    over = peak > tolerance
    text = f"t={step:3d} def {deformation:.2f}% peak {peak:.2f}%/{tolerance:.2f}%"
    colour = (220, 40, 40) if over else (20, 120, 20)
    cv2.putText(
        frame, text, (6, frame.shape[0] - 10), cv2.FONT_HERSHEY_SIMPLEX, 0.4, colour, 1, cv2.LINE_AA
    )
    if info.get("is_success"):
        cv2.putText(
            frame, "success", (6, 16), cv2.FONT_HERSHEY_SIMPLEX, 0.45, (20, 120, 20), 1, cv2.LINE_AA
        )
    return frame


def write_mp4(
    frames: list[np.ndarray],
    path: str | Path,
    fps: int = CONTROL_HZ,
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Encode ``frames`` (RGB uint8) as H.264 to ``path`` via a temporary file and a rename;
    ``metadata`` becomes container tags (any key, ``movflags=use_metadata_tags``)."""
    if not frames:
        raise ValueError(f"no frames to write to {path}")
    path = Path(path)
    height, width = frames[0].shape[:2]
    with (
        atomic_path(path) as tmp,
        av.open(str(tmp), mode="w", options={"movflags": "use_metadata_tags"}) as container,
    ):
        container.metadata.update({str(k): str(v) for k, v in (metadata or {}).items()})
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = width - width % 2, height - height % 2
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": "23", "preset": "veryfast"}
        for image in frames:
            image = np.ascontiguousarray(image[: stream.height, : stream.width])
            for packet in stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return path


def video_name(spec: EpisodeSpec) -> str:
    """The file name of ``spec``'s video: its key with ``/`` turned into ``_``."""
    return spec.key.replace("/", "_") + ".mp4"


def video_receipt(path: str | Path) -> str | None:
    """The record receipt stored in a video's metadata (None when it has none)."""
    with av.open(str(path)) as container:
        return container.metadata.get(RECEIPT_TAG)


class VideoObserver(EpisodeObserver):
    """Films one episode (see the module docstring) and writes it to ``path`` at its end."""

    def __init__(self, path: Path, size: tuple[int, int], fps: int) -> None:
        self.path, self.size, self.fps = path, size, fps
        self.frames: list[np.ndarray] = []
        self._rig: CameraRig | None = None
        self._low_level: list | None = None  # a macro-step env's low-level observer hooks
        self._hook = None

    def _film(self, env: gym.Env, obs: dict, info: dict) -> None:
        scene = self._rig.render(env.unwrapped.data)["scene"]
        self.frames.append(compose_frame(scene, obs["tactile"]["force"], info, len(self.frames)))

    def on_reset(self, env: gym.Env, obs: dict, info: dict, policy: Any) -> None:
        # The env's model is fixed from its reset on (a variation may have reloaded it).
        self._rig = CameraRig(env.unwrapped.model, ("scene",), *self.size)
        self._film(env, obs, info)
        # an env whose step is a macro action (clutter primitives) shows its low-level steps
        try:
            self._low_level = env.get_wrapper_attr("low_level_observers")
        except AttributeError:
            self._low_level = None
        if self._low_level is not None:
            self._hook = lambda low_obs, low_info: self._film(env, low_obs, low_info)
            self._low_level.append(self._hook)

    def on_step(self, env: gym.Env, obs: dict, info: dict, action: np.ndarray) -> None:
        if self._low_level is None:
            self._film(env, obs, info)

    def on_end(self, record: EpisodeRecord) -> None:
        if self._low_level is not None and self._hook in self._low_level:
            self._low_level.remove(self._hook)
        self._low_level = self._hook = None
        frames, self.frames = self.frames, []
        if self._rig is not None:
            self._rig.close()
            self._rig = None
        if record.error is None and frames:
            tags = {RECEIPT_TAG: record.receipt, SPEC_TAG: record.spec.key}
            write_mp4(frames, self.path, self.fps, metadata=tags)


@dataclass(frozen=True)
class EpisodeVideos:
    """Observer factory: a :class:`VideoObserver` for each spec in ``keys``, written to
    ``directory / video_name(spec)`` at ``size`` (height, width)."""

    directory: Path
    keys: frozenset[str]
    size: tuple[int, int] = DEFAULT_SIZE
    fps: int = CONTROL_HZ

    def __post_init__(self) -> None:
        if len(self.size) != 2 or not all(isinstance(n, int) and n >= 2 for n in self.size):
            raise ValueError(f"video size must be (height, width) in pixels >= 2, got {self.size}")

    def path(self, spec: EpisodeSpec) -> Path:
        return Path(self.directory) / video_name(spec)

    def __call__(self, spec: EpisodeSpec) -> VideoObserver | None:
        if spec.key not in self.keys:
            return None
        return VideoObserver(self.path(spec), tuple(self.size), self.fps)

    def has_video_of(self, record: EpisodeRecord) -> bool:
        """Whether ``record``'s video exists and carries its receipt (a finished episode)."""
        path = self.path(record.spec)
        if not path.is_file():
            return False
        try:
            return video_receipt(path) == record.receipt
        except (av.error.FFmpegError, OSError):
            return False  # a damaged file is filmed again
