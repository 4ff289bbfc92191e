"""Package layout for setuptools (the metadata is in pyproject.toml).

The Hydra configs and MuJoCo assets live at the repository's top level (``configs/``,
``assets/``), and the code finds them at ``simroll/_data/{configs,assets}``: in a checkout (and so
in an editable install) those are symlinks to the top-level folders; in a wheel they are real
folders, because ``package_dir`` maps the data packages ``simroll._data.configs`` and
``simroll._data.assets`` onto the top-level folders and ``package_data`` takes every file in them.
The data packages are listed here rather than found, so a build from an sdist (which keeps no
symlinks) ships them too.
"""

from pathlib import Path

from setuptools import find_namespace_packages, setup

HERE = Path(__file__).resolve().parent

DATA_PACKAGES = {"simroll._data.configs": "configs", "simroll._data.assets": "assets"}


def data_packages() -> list[str]:
    """The data packages and their sub-folders (listed, so setuptools does not warn that a
    folder it ships looks like a package missing from ``packages``)."""
    names = []
    for package, folder in DATA_PACKAGES.items():
        names.append(package)
        names += [f"{package}.{sub}" for sub in find_namespace_packages(where=HERE / folder)]
    return names


setup(
    packages=find_namespace_packages(
        include=["simroll", "simroll.*"], exclude=["simroll._data", "simroll._data.*"]
    )
    + data_packages(),
    package_dir=DATA_PACKAGES,
    package_data={
        "simroll": ["py.typed", "report/templates/*"],
        **{package: ["**/*"] for package in DATA_PACKAGES},
    },
)
