"""Episode videos: scene camera with a tactile inset and a deformation readout, H.264 mp4.

``record_video`` replays an episode spec (episodes are deterministic, so the replay is the
episode that was scored) with a render-enabled env and writes a browser-playable mp4
(H.264, yuv420p) through PyAV. Each frame shows the scene camera, both fingers' pressure maps in
the corner, and a text line with the step, the current and peak normalized deformation against
the object's tolerance, and the success flag.
"""

from __future__ import annotations

from pathlib import Path

import av
import cv2
import numpy as np

from simroll.features import tactile_to_rgb
from simroll.rollout.episode import EnvConfig, PolicyFactory, run_episode
from simroll.rollout.records import EpisodeRecord, EpisodeSpec


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


def write_mp4(frames: list[np.ndarray], path: str | Path, fps: int = 20) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.mp4")
    height, width = frames[0].shape[:2]
    with av.open(str(tmp), mode="w") as container:
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
    tmp.replace(path)
    return path


def record_video(
    spec: EpisodeSpec,
    policy_factory: PolicyFactory,
    env_config: EnvConfig,
    path: str | Path,
    size: tuple[int, int] = (240, 320),
    **episode_kwargs,
) -> tuple[Path, EpisodeRecord]:
    """Re-run ``spec`` with rendering on and write its video to ``path``."""
    frames: list[np.ndarray] = []

    def on_step(env, obs, info) -> None:
        scene = env.render()
        frames.append(compose_frame(scene, obs["tactile"]["force"], info, len(frames)))

    config = EnvConfig(
        **{
            **env_config.__dict__,
            "render_mode": "rgb_array",
            "kwargs": {**env_config.kwargs, "render_size": tuple(size)},
        }
    )
    record = run_episode(spec, policy_factory, env_config=config, on_step=on_step, **episode_kwargs)
    if not frames:
        raise RuntimeError(f"episode {spec.key} produced no frames: {record.error}")
    return write_mp4(frames, path), record
