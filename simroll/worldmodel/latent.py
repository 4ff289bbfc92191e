"""The world model's latent space: PCA of the object's shape, plus its pose and the hand's state.

The flat simulator state (``simroll.worldmodel.data.STATE_LAYOUT``) has one high-dimensional
block, the object's vertices relative to their centroid (144 numbers for the sponge), and a few
low-dimensional physical quantities (object yaw and centroid, hand pose, controller targets). The
shape block is projected on its first ``shape_components`` principal components, fitted on the
training split; the other kept blocks pass through; blocks listed in ``drop`` are left out (and
decoded as their training mean). Each latent coordinate is centred, and each *group* of
coordinates that share a unit (the shape modes; a position; an angle) is divided by one common
scale, the group's RMS standard deviation over the training states. A common scale per group,
rather than per coordinate, keeps the latent distance proportional to the physical one within a
group: a mode or an axis that barely moves stays small instead of being blown up to unit size.

Why PCA rather than an autoencoder: it is fitted in closed form in milliseconds on two cores,
deterministic, and exactly invertible on its subspace (``decode(encode(x))`` is the orthogonal
projection, whose error is measured and reported), and small deformations of an elastic lattice
are close to linear in a few modal shapes. An autoencoder would cost a training budget of its own
and add a second learned source of error that the round-trip signal would then have to separate
from the dynamics model's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# blocks whose last coordinate is an angle (yaw) in radians, the rest in metres
ANGLE_LAST = ("hand_pose", "hand_target")


def _groups(layout: Mapping[str, slice], kept: Sequence[str], shape_components: int):
    """Latent coordinate groups sharing one scale: shape modes, then each block's unit parts."""
    groups = [np.arange(shape_components)]
    position = shape_components
    for name in kept:
        width = layout[name].stop - layout[name].start
        if name in ANGLE_LAST and width > 1:
            groups.append(np.arange(position, position + width - 1))
            groups.append(np.array([position + width - 1]))
        else:
            groups.append(np.arange(position, position + width))
        position += width
    return groups


@dataclass
class StateLatent:
    """Fitted latent map: ``encode`` (states -> latents) and ``decode`` (latents -> states)."""

    shape_slice: slice
    kept_index: np.ndarray  # indices of the state features passed through (after the modes)
    state_mean: np.ndarray  # (F,), used to decode dropped features
    shape_mean: np.ndarray  # (S,)
    components: np.ndarray  # (k, S), orthonormal rows
    latent_mean: np.ndarray  # (L,)
    latent_scale: np.ndarray  # (L,), shared within a group
    explained_variance_ratio: float

    @classmethod
    def fit(
        cls,
        states: np.ndarray,
        layout: Mapping[str, slice],
        shape_components: int = 12,
        drop: Sequence[str] = (),
    ) -> StateLatent:
        states = np.asarray(states, dtype=np.float64)
        unknown = set(drop) - set(layout)
        if unknown or "shape" in drop:
            raise ValueError(f"drop must name non-shape blocks of {sorted(layout)}, got {drop}")
        shape = states[:, layout["shape"]]
        if not 1 <= shape_components <= min(shape.shape):
            raise ValueError(
                f"shape_components must be in [1, {min(shape.shape)}], got {shape_components}"
            )
        mean = shape.mean(axis=0)
        _, singular, vt = np.linalg.svd(shape - mean, full_matrices=False)
        variance = singular**2
        components = vt[:shape_components]
        # a component's sign is arbitrary: fix it so that refits on the same data agree
        signs = np.sign(components[np.arange(shape_components), np.abs(components).argmax(1)])
        components = components * signs[:, None]
        kept = [name for name in layout if name != "shape" and name not in drop]
        kept_index = np.concatenate(
            [np.arange(layout[n].start, layout[n].stop) for n in kept] or [np.zeros(0, int)]
        )
        latent = cls(
            layout["shape"],
            kept_index.astype(np.int64),
            states.mean(axis=0),
            mean,
            components,
            np.zeros(0),
            np.ones(0),
            float(variance[:shape_components].sum() / variance.sum()),
        )
        raw = latent._project(states)
        latent.latent_mean = raw.mean(axis=0)
        scale = np.ones(raw.shape[1])
        for group in _groups(layout, kept, shape_components):
            spread = float(np.sqrt(raw[:, group].var(axis=0).mean()))
            scale[group] = spread if spread > 1e-9 else 1.0
        latent.latent_scale = scale
        return latent

    @property
    def dim(self) -> int:
        return len(self.latent_mean)

    @property
    def state_dim(self) -> int:
        return len(self.state_mean)

    def _project(self, states: np.ndarray) -> np.ndarray:
        shape = states[..., self.shape_slice]
        modes = (shape - self.shape_mean) @ self.components.T
        return np.concatenate([modes, states[..., self.kept_index]], axis=-1)

    def encode(self, states: np.ndarray) -> np.ndarray:
        states = np.asarray(states, dtype=np.float64)
        if states.shape[-1] != self.state_dim:
            raise ValueError(f"states must have {self.state_dim} features, got {states.shape}")
        return (self._project(states) - self.latent_mean) / self.latent_scale

    def decode(self, latents: np.ndarray) -> np.ndarray:
        raw = np.asarray(latents, dtype=np.float64) * self.latent_scale + self.latent_mean
        k = len(self.components)
        states = np.broadcast_to(self.state_mean, (*raw.shape[:-1], self.state_dim)).copy()
        states[..., self.shape_slice] = raw[..., :k] @ self.components + self.shape_mean
        states[..., self.kept_index] = raw[..., k:]
        return states

    # -------------------------------------------------------------- (de)serialisation
    def tensors(self) -> dict[str, np.ndarray]:
        """Arrays for a safetensors file (see ``from_tensors``)."""
        return {
            "shape_slice": np.array([self.shape_slice.start, self.shape_slice.stop]),
            "kept_index": self.kept_index,
            "state_mean": self.state_mean,
            "shape_mean": self.shape_mean,
            "components": self.components,
            "latent_mean": self.latent_mean,
            "latent_scale": self.latent_scale,
            "explained_variance_ratio": np.array([self.explained_variance_ratio]),
        }

    @classmethod
    def from_tensors(cls, tensors: Mapping[str, np.ndarray]) -> StateLatent:
        start, stop = (int(v) for v in tensors["shape_slice"])
        return cls(
            slice(start, stop),
            np.asarray(tensors["kept_index"], dtype=np.int64),
            *(
                np.asarray(tensors[key], dtype=np.float64)
                for key in ("state_mean", "shape_mean", "components", "latent_mean", "latent_scale")
            ),
            float(tensors["explained_variance_ratio"][0]),
        )
