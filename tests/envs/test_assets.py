"""The asset catalog: calibrations load, unknown names and malformed or missing files raise
``AssetError`` naming what is wrong."""

from __future__ import annotations

import math

import mujoco
import pytest
import yaml

from simroll.assets import AssetError, get_object, list_objects
from simroll.envs.scene import build_xml, compile_model
from simroll.envs.soft import SoftLiftEnv

OBJECTS = ["dumpling", "foam_cylinder", "sponge", "tofu"]


def test_catalog_lists_the_four_soft_objects():
    assert list_objects() == OBJECTS


@pytest.mark.parametrize("name", OBJECTS)
def test_calibration_file_loads_with_a_positive_tolerance(name):
    calibration = get_object(name).calibration()
    assert math.isfinite(calibration.tolerance) and calibration.tolerance > 0
    assert calibration.tolerance == pytest.approx(
        calibration.safety_factor * calibration.reference_peak, rel=1e-4
    )
    assert "scripts/calibrate_objects.py" in calibration.procedure
    assert len(calibration.raw["reference_peaks"]) == len(calibration.raw["seeds"])


@pytest.mark.parametrize("rigid_twin", [False, True])
@pytest.mark.parametrize("name", OBJECTS)
def test_every_object_and_twin_compiles_into_the_scene(name, rigid_twin):
    assert ("<flexcomp" in build_xml(name, rigid_twin)) != rigid_twin
    model = compile_model(name, rigid_twin)
    assert model.nflex == (0 if rigid_twin else 1)
    assert mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "object") >= 0


def test_unknown_object_raises_asset_error_listing_valid_names():
    with pytest.raises(AssetError) as raised:
        SoftLiftEnv(object="jelly", obs_mode="state")
    message = str(raised.value)
    assert "'jelly'" in message
    for name in OBJECTS:
        assert name in message


def test_asset_error_is_a_value_error():
    assert issubclass(AssetError, ValueError)


def test_temp_assets_tree_builds_a_working_env(temp_assets):
    env = SoftLiftEnv(object="sponge", obs_mode="state")
    env.reset(seed=0)
    assert env.object_asset.folder == temp_assets / "objects" / "sponge"
    env.close()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("<mujoco><worldbody><body name='object'>", "is not valid XML"),
        (
            "<mujoco><worldbody><body name='thing'/></worldbody></mujoco>",
            'one <body name="object">',
        ),
        ("<robot><body name='object'/></robot>", "must be a <mujoco> file"),
    ],
)
@pytest.mark.parametrize("rigid_twin", [False, True])
def test_malformed_object_file_raises_asset_error_naming_the_file(
    temp_assets, text, message, rigid_twin
):
    path = temp_assets / "objects" / "sponge" / ("rigid.xml" if rigid_twin else "soft.xml")
    path.write_text(text)
    with pytest.raises(AssetError) as raised:
        SoftLiftEnv(object="sponge", rigid_twin=rigid_twin, obs_mode="state")
    assert str(path) in str(raised.value)
    assert message in str(raised.value)


def test_object_that_mujoco_cannot_compile_raises_asset_error_naming_the_object(temp_assets):
    path = temp_assets / "objects" / "tofu" / "soft.xml"
    path.write_text(path.read_text().replace('poisson="', 'poisson="banana '))
    with pytest.raises(AssetError, match="object 'tofu' \\(rigid_twin=False\\) failed to compile"):
        SoftLiftEnv(object="tofu", obs_mode="state")


def test_missing_twin_file_raises_asset_error_naming_the_file(temp_assets):
    path = temp_assets / "objects" / "sponge" / "rigid.xml"
    path.unlink()
    with pytest.raises(AssetError, match="is missing") as raised:
        SoftLiftEnv(object="sponge", rigid_twin=True, obs_mode="state")
    assert str(path) in str(raised.value)


def test_missing_calibration_raises_asset_error_unless_tolerance_is_given(temp_assets):
    path = temp_assets / "objects" / "sponge" / "calibration.yaml"
    path.unlink()
    with pytest.raises(AssetError, match="calibrate_objects.py") as raised:
        SoftLiftEnv(object="sponge", obs_mode="state")
    assert str(path) in str(raised.value) and "missing" in str(raised.value)
    env = SoftLiftEnv(object="sponge", obs_mode="state", tolerance=0.5)
    assert env.tolerance == 0.5


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("tolerance: [1, 2\n", "is not valid YAML"),
        ("- 1\n- 2\n", "must hold a mapping, got list"),
        ("reference_peak: 1.0\nsafety_factor: 1.0\n", "needs numeric tolerance"),
        (
            yaml.safe_dump({"tolerance": -1.0, "reference_peak": 1.0, "safety_factor": 1.0}),
            "tolerance must be finite and > 0, got -1.0",
        ),
        (
            yaml.safe_dump({"tolerance": "inf", "reference_peak": 1.0, "safety_factor": 1.0}),
            "tolerance must be finite and > 0, got inf",
        ),
    ],
)
def test_malformed_calibration_raises_asset_error_naming_the_file(temp_assets, content, message):
    path = temp_assets / "objects" / "sponge" / "calibration.yaml"
    path.write_text(content)
    with pytest.raises(AssetError) as raised:
        get_object("sponge").calibration()
    assert str(path) in str(raised.value)
    assert message in str(raised.value)


def test_yaw_symmetry_is_read_from_the_rigid_twins_shape():
    # boxes and meshes change under a turn about z (their yaw is randomized); cylinders do not
    symmetric = {name: get_object(name).yaw_symmetric for name in list_objects()}
    assert symmetric == {
        "dumpling": False,
        "foam_cylinder": True,
        "sponge": False,
        "tofu": False,
    }
