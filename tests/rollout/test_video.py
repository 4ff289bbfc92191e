"""Video frames: the tactile inset and readout fit any frame size a user asks for."""

from __future__ import annotations

import numpy as np
import pytest

from simroll.rollout.video import compose_frame


@pytest.mark.parametrize("size", [(240, 320), (96, 96), (48, 64), (20, 24)])
def test_compose_frame_keeps_the_frame_size_and_draws_the_inset_when_it_fits(size):
    scene = np.zeros((*size, 3), dtype=np.uint8)
    touch = np.full((2, 16, 12), 0.2)  # both pads pressed: a bright inset
    info = {"eval": {"deformation": 0.1, "peak_deformation": 0.2, "tolerance": 0.5}}
    frame = compose_frame(scene, touch, info, step=3)
    assert frame.shape == scene.shape
    untouched = compose_frame(scene, np.zeros_like(touch), info, step=3)
    # the smallest inset (one pixel per taxel, 16 x 26) needs a 24 x 34 frame
    inset_drawn = not np.array_equal(frame, untouched)
    assert inset_drawn == (size[0] >= 24 and size[1] >= 34)
