"""The round-trip benchmark's tests train and bench tiny world models: one torch thread, as in
tests/worldmodel (the same fixture)."""

from tests.worldmodel.conftest import one_torch_thread  # noqa: F401
