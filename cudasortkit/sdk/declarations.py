"""The declaration checks every plugin kind shares (sorts, selection,
search, multi-key): each kind's base class runs the ones that apply to it,
then its own. Each raises TypeError or ValueError naming the plugin and the
rule it breaks."""
from __future__ import annotations

from ..dtypes import KEY_DTYPES


def check_subclass(cls, base) -> None:
    """`cls` is a proper subclass of the kind's base class."""
    if not (isinstance(cls, type) and issubclass(cls, base)) or cls is base:
        raise TypeError(f"{cls!r} is not a subclass of cudasortkit.{base.__name__}")


def check_name(cls, entry_point_name: str | None) -> None:
    """The plugin's name is an identifier, the same as its entry point's."""
    if not isinstance(cls.name, str) or not cls.name.isidentifier():
        raise ValueError(f"{cls.__name__}.name must be an identifier, got {cls.name!r}")
    if entry_point_name is not None and cls.name != entry_point_name:
        raise ValueError(f"entry point {entry_point_name!r} loads a plugin named {cls.name!r}; "
                         f"they must match")


def check_dtypes(cls) -> None:
    """dtypes: a non-empty subset of cudasortkit.dtypes.KEY_DTYPES."""
    unknown = [d for d in cls.dtypes if d not in KEY_DTYPES]
    if unknown:
        raise ValueError(f"{cls.name}: dtypes must be a non-empty subset of {KEY_DTYPES}, "
                         f"unknown: {unknown}")
    if not cls.dtypes:
        raise ValueError(f"{cls.name}: declares no key dtypes")


def check_device(cls, devices=("gpu", "cpu")) -> None:
    """device is one the kind runs on; a GPU plugin names kernel templates
    that exist in its template_package."""
    if cls.device not in devices:
        raise ValueError(f"{cls.name}: device must be one of {', '.join(map(repr, devices))}, "
                         f"got {cls.device!r}")
    if cls.device == "gpu":
        if not cls.templates:
            raise ValueError(f"{cls.name}: a GPU plugin must declare its kernel templates")
        from ..build.render import template_path

        for template in cls.templates:
            template_path(cls.template_package, template)  # raises FileNotFoundError


def check_tunables(cls, tunable_type) -> None:
    """Every tunable is a Tunable named by an identifier; a GPU plugin has block_size."""
    for name, tunable in cls.tunables.items():
        if not isinstance(tunable, tunable_type):
            raise TypeError(f"{cls.name}: tunable {name!r} must be a cudasortkit.Tunable")
        if not name.isidentifier():
            raise ValueError(f"{cls.name}: tunable name {name!r} is not an identifier")
    if cls.device == "gpu" and "block_size" not in cls.tunables:
        raise ValueError(f"{cls.name}: a GPU plugin must declare a 'block_size' tunable")


def check_implements(cls, base, *methods) -> None:
    """`cls` overrides each of the base class's abstract `methods`."""
    for method in methods:
        if getattr(cls, method) is getattr(base, method):
            raise TypeError(f"{cls.name}: does not implement {method}()")
