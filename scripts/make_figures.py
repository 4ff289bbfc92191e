"""Renders the README's pictures into docs/images/: one frame of each soft task, the objects, and
a clutter scene (``ClutterRetrieve.png``: first frame, its segmentation, after the plan's pushes).

Each task picture is a frame of a gentle-expert episode (seed 0) at the moment named in
``MOMENTS``, rendered from the scene camera with the tactile inset and deformation readout the
eval videos use. ``objects.png`` shows every soft object next to its rigid twin at rest.

Run: ``MUJOCO_GL=egl python scripts/make_figures.py``
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from simroll.assets import list_objects  # noqa: E402
from simroll.experts import SoftExpert  # noqa: E402
from simroll.io import atomic_path  # noqa: E402
from simroll.rollout.episode import EnvConfig, EpisodeObserver, run_episode  # noqa: E402
from simroll.rollout.records import EpisodeSpec, derive_seed  # noqa: E402
from simroll.rollout.video import compose_frame  # noqa: E402

OUT = Path(__file__).resolve().parents[1] / "docs" / "images"
SIZE = (240, 320)
# (object, fraction of the episode at which to take the frame)
MOMENTS = {
    "SoftLift": ("sponge", 0.97),
    "SoftPlace": ("tofu", 0.55),
    "SoftSqueeze": ("dumpling", 0.97),
}


def task_picture(task: str) -> Path:
    obj, fraction = MOMENTS[task]
    spec = EpisodeSpec(task, obj, "default", derive_seed("soft", task, 0), 0)
    frames: list[np.ndarray] = []

    class Film(EpisodeObserver):
        def on_reset(self, env, obs, info, policy):
            frames.append(compose_frame(env.render(), obs["tactile"]["force"], info, len(frames)))

        def on_step(self, env, obs, info, action):
            self.on_reset(env, obs, info, None)

    config = EnvConfig(render_mode="rgb_array", kwargs={"render_size": SIZE})
    record = run_episode(
        spec, lambda env: SoftExpert(env, "gentle"), env_config=config, observers=[Film()]
    )
    frame = frames[min(len(frames) - 1, int(fraction * len(frames)))]
    path = OUT / f"{task}.png"
    with atomic_path(path) as temporary:
        Image.fromarray(frame).save(temporary)
    print(f"{path}: {task} on {obj}, success={record.success}, peak={record.peak_deformation:.2f}%")
    return path


def objects_picture() -> Path:
    import gymnasium as gym

    tiles = []
    for obj in list_objects():
        row = []
        for twin in (False, True):
            env = gym.make(
                "simroll/SoftLift-v0",
                object=obj,
                rigid_twin=twin,
                obs_mode="state",
                render_mode="rgb_array",
                render_size=(160, 160),
            )
            env.reset(seed=0)
            row.append(env.render())
            env.close()
        tiles.append(np.concatenate(row, axis=0))
    path = OUT / "objects.png"
    with atomic_path(path) as temporary:
        Image.fromarray(np.concatenate(tiles, axis=1)).save(temporary)
    print(f"{path}: soft objects (top) and rigid twins (bottom): {list_objects()}")
    return path


def clutter_picture(tier: str = "Hard", seed: int = 0) -> Path:
    """Three panels of one clutter scene: the unoccluded first frame the twin is built from, its
    segmentation (one colour per block, the target red), and the scene after the nominal plan's
    pushes, just before its grasp."""
    import gymnasium as gym

    from simroll.envs.clutter.primitives import GRASP

    env = gym.make(f"simroll/ClutterRetrieve{tier}-v0", image_size=SIZE[0])
    obs, info = env.reset(seed=seed)
    first = env.get_wrapper_attr("first_observation")
    segmentation = first["segmentation"]
    palette = np.array(
        [[215, 40, 30]] + [[60 + 17 * i, 110 + 9 * i, 200 - 13 * i] for i in range(10)], np.uint8
    )
    coloured = np.where(segmentation[..., None] >= 0, palette[segmentation], 235).astype(np.uint8)
    for primitive in obs["plan_primitives"][: int(obs["plan_length"])]:
        if primitive == GRASP:
            break
        obs, *_ = env.step(int(primitive))
    panels = [first["pixels"]["scene"], coloured, obs["pixels"]["scene"]]
    env.close()
    path = OUT / "ClutterRetrieve.png"
    with atomic_path(path) as temporary:
        Image.fromarray(np.concatenate(panels, axis=1)).save(temporary)
    print(f"{path}: {tier} scene seed {seed}, plan {info['plan_length']} primitives")
    return path


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for task in MOMENTS:
        task_picture(task)
    objects_picture()
    clutter_picture()


if __name__ == "__main__":
    main()
