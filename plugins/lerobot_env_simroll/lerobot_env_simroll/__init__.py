"""LeRobot env plugin for simroll: ``lerobot-eval --env.type=simroll --env.task=SoftLift-v0``.

LeRobot's CLIs import every installed distribution whose name starts with ``lerobot_env_``
(``register_third_party_plugins``); importing this one registers :class:`SimrollEnv` under the
choice name ``simroll`` and the gym ids ``lerobot_env_simroll/<Task>-v0`` that it makes (simroll's
tasks wrapped in :class:`~lerobot_env_simroll.env.LeRobotView`). ``features``/``features_map``
name the observations the way ``simroll collect`` datasets do, and the defaults (full
observations, ``image_size`` 96, the ``delta`` gripper, the tactile image) are those of
``simroll collect``, so a policy trained on such a dataset is evaluated here without a rename map
or extra flags (pass ``--env.image_size`` / ``--env.obs_type`` for a dataset collected otherwise).
Offline, from a dataset to its evaluation (``pretrained_backbone_weights=null``: ACT and diffusion
would otherwise download ImageNet ResNet weights; SimVLA has none)::

    simroll collect env=soft_lift episodes=50 output_dir=data/soft_lift_expert
    HF_HUB_OFFLINE=1 lerobot-train --dataset.repo_id=simroll/soft_lift_expert \
        --dataset.root=data/soft_lift_expert --policy.type=act \
        --policy.pretrained_backbone_weights=null --policy.push_to_hub=false \
        --wandb.enable=false --output_dir=outputs/act
    lerobot-eval --env.type=simroll --env.task=SoftLift-v0 \
        --policy.path=outputs/act/checkpoints/last/pretrained_model
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lerobot.configs import FeatureType, PolicyFeature
from lerobot.envs.configs import EnvConfig

from lerobot_env_simroll.env import ID_PREFIX, register_envs
from simroll.envs.clutter.retrieve import BLOCKS
from simroll.envs.core import CONTROL_HZ
from simroll.envs.sensing import MARKER_GRID
from simroll.features import (
    ACTION_DIM,
    ACTION_KEY,
    CAMERAS,
    ENVIRONMENT_STATE_KEY,
    ENVIRONMENT_STATE_NAMES,
    FINGERS,
    FOLLOWING_ERROR_KEY,
    FOLLOWING_ERROR_NAMES,
    STATE_KEY,
    STATE_NAMES,
    TACTILE_IMAGE_SIZE,
    TACTILE_KEY,
    TACTILE_MARKERS_KEY,
    TAXEL_GRID,
    image_key,
)

OBS_TYPES = {"pixels_agent_pos": "full", "environment_state_agent_pos": "state"}
TACTILE_SHAPE = (FINGERS, *TAXEL_GRID)  # simroll's default taxel grid, both fingers
MARKERS = MARKER_GRID[0] * MARKER_GRID[1]  # gel markers per finger

register_envs()


@EnvConfig.register_subclass("simroll")
@dataclass
class SimrollEnv(EnvConfig):
    """One simroll task on one object; ``task`` is the gym task name with its version
    (``SoftLift-v0``, ``SoftPlace-v0``, ``SoftSqueeze-v0``, ``ClutterRetrieve-v0``; for clutter
    ``object`` is the target: a shape such as ``cuboid``, or a soft target such as ``sponge``)."""

    task: str = "SoftLift-v0"
    object: str = "sponge"
    variation: str = "default"
    fps: int = CONTROL_HZ
    episode_length: int | None = None  # None: the task's own limit
    obs_type: str = "pixels_agent_pos"  # or "environment_state_agent_pos" (privileged state)
    image_size: int = 96  # `simroll collect`'s env.image_size
    gripper_mode: str = "delta"  # what `simroll collect` records and the shipped policies use
    tactile: bool = True  # observation.tactile and observation.tactile_markers
    tactile_image: bool = True  # observation.images.tactile, as `simroll collect` records it
    clip_actions: bool = True
    render_mode: str = "rgb_array"
    render_height: int = 240
    render_width: int = 320
    features: dict[str, PolicyFeature] = field(
        default_factory=lambda: {
            ACTION_KEY: PolicyFeature(type=FeatureType.ACTION, shape=(ACTION_DIM,)),
            "agent_pos": PolicyFeature(type=FeatureType.STATE, shape=(len(STATE_NAMES),)),
            "following_error": PolicyFeature(
                type=FeatureType.STATE, shape=(len(FOLLOWING_ERROR_NAMES),)
            ),
        }
    )
    features_map: dict[str, str] = field(
        default_factory=lambda: {
            ACTION_KEY: ACTION_KEY,
            "agent_pos": STATE_KEY,
            "following_error": FOLLOWING_ERROR_KEY,
            "environment_state": ENVIRONMENT_STATE_KEY,
            **{f"pixels/{name}": image_key(name) for name in (*CAMERAS, "tactile")},
            "tactile": TACTILE_KEY,
            "tactile_markers": TACTILE_MARKERS_KEY,
        }
    )

    def __post_init__(self) -> None:
        if self.obs_type not in OBS_TYPES:
            raise ValueError(
                f"env.obs_type must be one of {sorted(OBS_TYPES)}, got {self.obs_type!r}"
            )
        if self.fps != CONTROL_HZ:
            raise ValueError(f"env.fps must be simroll's control rate {CONTROL_HZ}, got {self.fps}")
        size = (self.image_size, self.image_size, 3)
        if self.obs_type == "pixels_agent_pos":
            for camera in CAMERAS:
                self.features[f"pixels/{camera}"] = PolicyFeature(FeatureType.VISUAL, size)
        else:
            shape = (len(ENVIRONMENT_STATE_NAMES),)
            if self.task.startswith("ClutterRetrieve"):  # x, y, z, yaw of every block
                shape = (BLOCKS * 4,)
            self.features["environment_state"] = PolicyFeature(FeatureType.ENV, shape)
        if self.tactile_image:  # square, at the cameras' size when there are cameras
            side = self.image_size if self.obs_type == "pixels_agent_pos" else TACTILE_IMAGE_SIZE
            self.features["pixels/tactile"] = PolicyFeature(FeatureType.VISUAL, (side, side, 3))
        if self.tactile:
            size = int(TACTILE_SHAPE[0] * TACTILE_SHAPE[1] * TACTILE_SHAPE[2])
            self.features["tactile"] = PolicyFeature(FeatureType.STATE, (size,))
            markers = (FINGERS * MARKERS * 2,)  # a displacement (2 floats) per marker
            self.features["tactile_markers"] = PolicyFeature(FeatureType.STATE, markers)

    @property
    def package_name(self) -> str:
        return ID_PREFIX

    @property
    def gym_kwargs(self) -> dict:
        kwargs = {
            "object": self.object,
            "variation": self.variation,
            "obs_mode": OBS_TYPES[self.obs_type],
            "image_size": self.image_size,
            "gripper_mode": self.gripper_mode,
            "render_mode": self.render_mode,
            "render_size": (self.render_height, self.render_width),
            "tactile": self.tactile,
            "tactile_image": self.tactile_image,
            "clip_actions": self.clip_actions,
        }
        if self.episode_length is not None:
            kwargs["max_episode_steps"] = self.episode_length
        return kwargs


__all__ = ["SimrollEnv"]
