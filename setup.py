"""The package list: every package under cudasortkit/, and the top-level
kernels/ and plugins/ folders, which setup.cfg's package_dir maps to
cudasortkit.kernels and cudasortkit.plugins. Everything else is in setup.cfg."""
from setuptools import find_packages, setup

MAPPED = ["cudasortkit.kernels", "cudasortkit.plugins"]

setup(packages=find_packages(include=["cudasortkit", "cudasortkit.*"]) + MAPPED)
