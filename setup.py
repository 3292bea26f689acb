"""The one thing of the build that pyproject.toml cannot say: the tracking configurations live at the
repository's top level (``mlruns_config/``, where a user looks for them and edits them) and ship inside
the package, as the package data of ``cctk.store.mlruns_config``: ``package_dir`` maps that package onto
the top-level folder, and the wheel holds ``cctk/store/mlruns_config/*.toml`` (the sdist keeps the folder
at its top, and the wheel built from it maps it again). pyproject.toml's ``packages.find`` cannot name a
package that lies outside the folder it searches, so the packages are found here, with that one added.
A checkout (``pip install -e .``, or the tests) reads the top-level folder itself: see
``cctk.store.tracking.config_folders``. Everything else is in pyproject.toml."""

from setuptools import find_namespace_packages, setup

CONFIGURATIONS = "cctk.store.mlruns_config"

setup(
    packages=[*find_namespace_packages(include=["cctk*"]), CONFIGURATIONS],
    package_dir={CONFIGURATIONS: "mlruns_config"},
)
