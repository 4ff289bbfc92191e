"""The observation/action schema of simroll's envs and its LeRobot names, in one place.

This module owns the layout every other part writes, reads or checks: the 5-D action
(``ACTION_NAMES``: hand-target deltas ``dx, dy, dz, dyaw``, then the gripper command, last, at
index ``GRIPPER``) and :func:`hold_action`, the action that keeps the hand still; the names of
``agent_pos`` (``STATE_NAMES``), ``following_error`` (``FOLLOWING_ERROR_NAMES``),
``environment_state`` (``ENVIRONMENT_STATE_NAMES``), the cameras (``CAMERAS``) and image axes
(``IMAGE_NAMES``); and the LeRobot mapping: the feature keys (``observation.images.{scene,wrist,
tactile}``, ``observation.tactile``, ``observation.tactile_markers``, ``observation.state``,
``observation.following_error``, ``observation.environment_state``, ``action``, and the
evaluator's ``eval.deformation``), :func:`dataset_features` (the LeRobotDataset feature spec of
an env's observation space), :func:`observation_frame` (one observation under those keys, as
datasets store it and LeRobot policies read it) and :func:`tactile_image` /
:func:`tactile_image_size` (both fingers' pressure maps rendered as the
``observation.images.tactile`` image). Envs, dataset recording, the LeRobot policy wrapper and env
plugin, SimVLA, the experts, certification's accelerations and the world model import it from
here. It imports no simulator, policy or rollout code, so every layer may use it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import cv2
import numpy as np

if TYPE_CHECKING:
    from gymnasium import spaces

# ------------------------------------------------------------------------- action
ACTION_NAMES = ("dx", "dy", "dz", "dyaw", "gripper")
ACTION_DIM = len(ACTION_NAMES)
HAND = slice(0, 4)  # the hand-target deltas of an action, in units of the env's MAX_STEP
GRIPPER = ACTION_NAMES.index("gripper")  # the gripper command: the last entry
GRIPPER_OPEN = -1.0  # fully open (continuous, binary), or opening (delta): the jaw's start
GRIPPER_MODES = ("continuous", "binary", "delta")

# ------------------------------------------------------------------------- observation
STATE_NAMES = (  # agent_pos: hand pose, its velocity, the jaw, each finger's grip force (N)
    "hand_x",
    "hand_y",
    "hand_z",
    "hand_yaw",
    "hand_vx",
    "hand_vy",
    "hand_vz",
    "hand_vyaw",
    "jaw_opening",
    "jaw_velocity",
    "grip_force_left",
    "grip_force_right",
)
ENVIRONMENT_STATE_NAMES = (  # object pose, goal, the object's offset from the observed hand pose
    "object_x",
    "object_y",
    "object_z",
    "object_yaw",
    "goal_x",
    "goal_y",
    "goal_z",
    "object_dx",
    "object_dy",
    "object_dz",
    "object_dyaw",
)
# following_error: the hand and jaw controllers' commanded minus measured positions (metres, and
# radians for yaw), what a position-controlled robot knows from its own setpoints and encoders.
# A hand pressing on an object, or a jaw squeezing one, stops short of its target; only this
# error tells how far the commands have run ahead of the measured pose.
FOLLOWING_ERROR_NAMES = ("error_x", "error_y", "error_z", "error_yaw", "error_jaw")
OBS_MODES = ("full", "state")  # cameras (``pixels``) or privileged ``environment_state``
CAMERAS = ("scene", "wrist")  # the ``pixels`` entries of full observations
FINGERS = 2  # tactile maps, marker fields and grip forces come one per finger
TAXEL_GRID = (16, 12)  # default taxel rows x columns per finger (the env's ``tactile_shape``)
IMAGE_NAMES = ("height", "width", "channels")
TACTILE_IMAGE_SIZE = 64  # side of the tactile image when there are no cameras to match

# ------------------------------------------------------------------------- LeRobot keys
# The strings of lerobot.utils.constants (OBS_STATE, OBS_ENV_STATE, OBS_IMAGES, ACTION), spelled
# out so that importing the schema does not import LeRobot and torch; a test pins them equal.
IMAGE_PREFIX = "observation.images."
STATE_KEY = "observation.state"
ENVIRONMENT_STATE_KEY = "observation.environment_state"
TACTILE_KEY = "observation.tactile"
TACTILE_MARKERS_KEY = "observation.tactile_markers"
FOLLOWING_ERROR_KEY = "observation.following_error"
ACTION_KEY = "action"
# clutter retrieval: the partial object observation and the episode's nominal plan (flattened)
OBJECTS_KEY = "observation.objects"
PLAN_KEYS = {
    "plan_primitives": "observation.plan_primitives",
    "plan_poses": "observation.plan_poses",
    "plan_length": "observation.plan_length",
    "plan_step": "observation.plan_step",
}
# clutter retrieval: the grasp primitive's own check on the current detections (clear, room,
# blockage; simroll.envs.clutter.primitives.grasp_check), which plan-conditioned envs add
GRASP_CHECK_KEY = "observation.grasp_check"
PRIMITIVE_ACTION_NAMES = ("primitive",)  # the action of a primitive-level (Discrete) env
# the clutter primitives (simroll.envs.clutter.primitives), in action-index order: 16 pushes of
# 4 cm in the hand frame (axial; per diagonal straight, x then y, y then x), the grasp, a look
PRIMITIVE_NAMES = (
    "push_+x",
    "push_-x",
    "push_+y",
    "push_-y",
    *(
        f"push_{diagonal}{route}"
        for diagonal in ("++", "+-", "-+", "--")
        for route in ("", "_x_then_y", "_y_then_x")
    ),
    "grasp",
    "look",
)
GRASP_PRIMITIVE = PRIMITIVE_NAMES.index("grasp")
DEFORMATION_KEY = "eval.deformation"  # evaluator data a policy never trains on
# auxiliary training labels the trainer adds to a batch: the target's table position (x, y) and
# 1 where the sample is labelled (simroll.train.goal_labels); never an observation
GOAL_LABEL_KEY, GOAL_MASK_KEY = "aux.goal", "aux.goal_mask"


def image_key(name: str) -> str:
    """The LeRobot key of image ``name`` (a camera or ``"tactile"``)."""
    return IMAGE_PREFIX + name


TACTILE_IMAGE_KEY = image_key("tactile")


def is_camera_key(key: str) -> bool:
    """Whether LeRobot feature ``key`` is a camera image (not the rendered tactile image)."""
    return key.startswith(IMAGE_PREFIX) and key != TACTILE_IMAGE_KEY


# ------------------------------------------------------------------------- functions
def hold_action(
    previous: np.ndarray | None = None, *, gripper_mode: str = "continuous"
) -> np.ndarray:
    """The action that keeps the hand where it was last commanded: zero hand deltas, and the
    gripper command that keeps the jaw's target: ``previous``'s command again in the absolute
    gripper modes (``"continuous"``, ``"binary"``), zero in ``"delta"`` mode. Before any command
    (``previous`` None) it is ``GRIPPER_OPEN``: the jaw starts fully open, which -1 keeps in every
    mode (in ``"delta"`` it opens a jaw that cannot open further). A float32 array of
    ``ACTION_DIM``."""
    if gripper_mode not in GRIPPER_MODES:
        raise ValueError(f"gripper_mode must be one of {GRIPPER_MODES}, got {gripper_mode!r}")
    action = np.zeros(ACTION_DIM, dtype=np.float32)
    if previous is None:
        action[GRIPPER] = GRIPPER_OPEN
    elif gripper_mode != "delta":
        action[GRIPPER] = np.asarray(previous).reshape(-1)[GRIPPER]
    return action


def tactile_to_rgb(
    reading_force: np.ndarray, scale_newton: float = 0.15, size: int = 64
) -> np.ndarray:
    """Both fingers' pressure maps side by side as a uint8 RGB image (dark = no contact, bright
    orange = ``scale_newton`` per taxel or more), for videos and datasets."""
    low, high = np.array([25.0, 25.0, 35.0]), np.array([255.0, 170.0, 40.0])
    panels = []
    for finger in range(reading_force.shape[0]):
        pressure = np.clip(reading_force[finger] / scale_newton, 0.0, 1.0)
        rows, cols = pressure.shape
        reps = max(1, size // rows)
        big = np.kron(pressure, np.ones((reps, reps)))[..., None]
        panels.append((low + (high - low) * np.sqrt(big)).astype(np.uint8))
        panels.append(np.full((big.shape[0], 2, 3), 255, dtype=np.uint8))
    return np.concatenate(panels[:-1], axis=1)


def tactile_image(force: np.ndarray, size: int = TACTILE_IMAGE_SIZE) -> np.ndarray:
    """Both fingers' pressure maps as one ``size`` x ``size`` uint8 RGB image (taxels kept as
    sharp blocks): the ``observation.images.tactile`` of datasets and the LeRobot env plugin."""
    image = tactile_to_rgb(np.asarray(force), size=size)
    return cv2.resize(image, (size, size), interpolation=cv2.INTER_NEAREST)


def tactile_image_size(observation_space: spaces.Dict) -> int:
    """The cameras' image size when the observations have cameras, else ``TACTILE_IMAGE_SIZE``."""
    if "pixels" in observation_space.spaces:
        return int(next(iter(observation_space["pixels"].spaces.values())).shape[0])
    return TACTILE_IMAGE_SIZE


def _flat(space: Any) -> dict[str, Any]:
    return {"dtype": "float32", "shape": (int(np.prod(space.shape)) or 1,), "names": None}


def dataset_features(
    observation_space: spaces.Dict,
    *,
    use_videos: bool = True,
    with_tactile_image: bool = True,
    action_space: Any = None,
) -> dict[str, dict[str, Any]]:
    """LeRobot feature spec for a simroll env's observation space (plus action and evaluator).

    The clutter envs' extra entries are stored flattened as float32 (``observation.objects``,
    the ``observation.plan_*`` keys, a block-pose ``observation.environment_state``); their
    depth and segmentation images are not stored. A ``Discrete`` ``action_space`` (the clutter
    primitives) is stored as one float per frame, the primitive's index."""
    visual = "video" if use_videos else "image"
    features: dict[str, dict[str, Any]] = {}
    if "pixels" in observation_space.spaces:
        for camera, space in observation_space["pixels"].spaces.items():
            features[image_key(camera)] = {
                "dtype": visual,
                "shape": tuple(space.shape),
                "names": list(IMAGE_NAMES),
            }
    tactile = observation_space["tactile"]
    if with_tactile_image:
        size = tactile_image_size(observation_space)
        features[TACTILE_IMAGE_KEY] = {
            "dtype": visual,
            "shape": (size, size, 3),
            "names": list(IMAGE_NAMES),
        }
    features[TACTILE_KEY] = {
        "dtype": "float32",
        "shape": (int(np.prod(tactile["force"].shape)),),
        "names": None,
    }
    features[TACTILE_MARKERS_KEY] = {
        "dtype": "float32",
        "shape": (int(np.prod(tactile["markers"].shape)),),
        "names": None,
    }
    features[STATE_KEY] = {
        "dtype": "float32",
        "shape": tuple(observation_space["agent_pos"].shape),
        "names": list(STATE_NAMES),
    }
    if "following_error" in observation_space.spaces:
        features[FOLLOWING_ERROR_KEY] = {
            "dtype": "float32",
            "shape": (len(FOLLOWING_ERROR_NAMES),),
            "names": list(FOLLOWING_ERROR_NAMES),
        }
    if "environment_state" in observation_space.spaces:
        space = observation_space["environment_state"]
        if space.shape == (len(ENVIRONMENT_STATE_NAMES),):
            features[ENVIRONMENT_STATE_KEY] = {
                "dtype": "float32",
                "shape": tuple(space.shape),
                "names": list(ENVIRONMENT_STATE_NAMES),
            }
        else:  # clutter: every block's pose
            features[ENVIRONMENT_STATE_KEY] = _flat(space)
    if "objects" in observation_space.spaces:
        features[OBJECTS_KEY] = _flat(observation_space["objects"])
    for name, key in PLAN_KEYS.items():
        if name in observation_space.spaces:
            features[key] = _flat(observation_space[name])
    if "grasp_check" in observation_space.spaces:
        features[GRASP_CHECK_KEY] = {
            "dtype": "float32",
            "shape": (3,),
            "names": ["clear", "room_m", "blockage_m2"],
        }
    if action_space is not None and hasattr(action_space, "n"):  # gymnasium Discrete
        features[ACTION_KEY] = {
            "dtype": "float32",
            "shape": (1,),
            "names": list(PRIMITIVE_ACTION_NAMES),
        }
    else:
        features[ACTION_KEY] = {
            "dtype": "float32",
            "shape": (ACTION_DIM,),
            "names": list(ACTION_NAMES),
        }
    features[DEFORMATION_KEY] = {"dtype": "float32", "shape": (1,), "names": None}
    return features


def observation_frame(obs: Mapping[str, Any], tactile_image_size: int | None) -> dict[str, Any]:
    """A simroll observation under LeRobot's keys (every ``observation.*`` of a frame); the
    tactile image is added at ``tactile_image_size`` unless that is None."""
    force = np.asarray(obs["tactile"]["force"], dtype=np.float32)
    frame: dict[str, Any] = {}
    for camera, image in obs.get("pixels", {}).items():
        frame[image_key(camera)] = np.asarray(image, dtype=np.uint8)
    if tactile_image_size is not None:
        frame[TACTILE_IMAGE_KEY] = tactile_image(force, tactile_image_size)
    frame[TACTILE_KEY] = force.reshape(-1).copy()
    frame[TACTILE_MARKERS_KEY] = (
        np.asarray(obs["tactile"]["markers"], dtype=np.float32).reshape(-1).copy()
    )
    frame[STATE_KEY] = np.asarray(obs["agent_pos"], dtype=np.float32).copy()
    if "following_error" in obs:
        frame[FOLLOWING_ERROR_KEY] = np.asarray(obs["following_error"], dtype=np.float32).copy()
    if "environment_state" in obs:
        frame[ENVIRONMENT_STATE_KEY] = (
            np.asarray(obs["environment_state"], dtype=np.float32).reshape(-1).copy()
        )
    if "objects" in obs:
        frame[OBJECTS_KEY] = np.asarray(obs["objects"], dtype=np.float32).reshape(-1).copy()
    for name, key in PLAN_KEYS.items():
        if name in obs:
            frame[key] = np.asarray(obs[name], dtype=np.float32).reshape(-1).copy()
    if "grasp_check" in obs:
        frame[GRASP_CHECK_KEY] = np.asarray(obs["grasp_check"], dtype=np.float32).copy()
    return frame
