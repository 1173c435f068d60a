"""Key and value dtypes cudasortkit sorts, and how kernels see them.

Kernels move keys as unsigned words and compare an order-preserving transform
of them (kernels/include/keys.cuh), so a key dtype is fully described to a kernel by
its width and its kind (unsigned, signed or float; 2-byte floats are IEEE
half or bfloat16).

bfloat16 is ml_dtypes' NumPy dtype (the one JAX and TensorFlow use, and what
a torch.bfloat16 tensor is seen as): NumPy has none of its own, so sorting
bfloat16 needs the ml_dtypes package.
"""
from __future__ import annotations

import functools

import numpy as np

#: Every key dtype the library knows, in the order tables print them.
KEY_DTYPES = (
    "int8", "int16", "int32", "int64",
    "uint8", "uint16", "uint32", "uint64",
    "float16", "bfloat16", "float32", "float64",
)

#: What the array libraries call the supported dtypes, for error messages.
SUPPORTED_TEXT = ("bool, " + ", ".join(KEY_DTYPES)
                  + " (host arrays of either byte order, device arrays native)")

KIND_UNSIGNED, KIND_SIGNED, KIND_FLOAT = 0, 1, 2

#: argsort's default index dtype.
INDEX_DTYPE = np.dtype(np.int64)
#: argsort's index dtypes: int64 (the default) and int32 (n < 2^31, half the
#: index traffic). The request carries the choice as its value_bytes.
INDEX_DTYPES = {8: INDEX_DTYPE, 4: np.dtype(np.int32)}
INT32_INDEX_LIMIT = 1 << 31

#: Width in bytes of the value payloads kernels move (argsort uses int64).
VALUE_BYTES = (4, 8)
#: NumPy kinds a value dtype may have (integer, unsigned, float, complex).
VALUE_KINDS = "iufc"
#: What keys and values may be, for error messages.
KEYS_RULE = f"keys must be one of {SUPPORTED_TEXT}"
VALUES_RULE = ("values must be a numeric dtype of 4 or 8 bytes: "
               "int32, uint32, float32, int64, uint64, float64, complex64")


def key_dtype(dtype) -> np.dtype:
    """The key dtype a kernel sorts for `dtype`: bool sorts as uint8.

    Raises TypeError naming the supported dtypes for anything else.
    """
    return _key_dtype(np.dtype(dtype))


def key_name(dtype) -> str:
    """key_dtype(dtype).name, remembered."""
    return _key_name(np.dtype(dtype))


@functools.lru_cache(maxsize=None)
def _key_name(dt: np.dtype) -> str:
    return _key_dtype(dt).name


@functools.lru_cache(maxsize=None)
def _key_dtype(dt: np.dtype) -> np.dtype:  # every sort asks; dt.name alone costs microseconds
    if dt == np.bool_:
        return np.dtype(np.uint8)
    if dt.name not in KEY_DTYPES or not dt.isnative or (dt.kind == "V" and not is_bfloat16(dt)):
        raise TypeError(f"cudasortkit cannot sort dtype {dt!r}; supported key dtypes are "
                        f"{SUPPORTED_TEXT}")
    return dt


def exact_common_dtype(x, y) -> np.dtype | None:
    """NumPy's result_type of key dtypes x and y where it is a key dtype that
    holds every value of both exactly (int32 and int64: int64; int16 and
    float32: float32); None where it does not (int64 and uint64, whose
    result_type float64 rounds large integers)."""
    x, y = np.dtype(x), np.dtype(y)
    try:
        common = np.result_type(x, y)
        key_dtype(common)
    except TypeError:
        return None
    return common if _holds(common, x) and _holds(common, y) else None


def _holds(common: np.dtype, d: np.dtype) -> bool:
    """Whether every value of d is a value of common."""
    if d == common:
        return True
    if d.kind in "biu" and (common.kind == "f" or is_bfloat16(common)):
        bits = 1 if d.kind == "b" else 8 * d.itemsize - (d.kind == "i")
        mantissa = 8 if is_bfloat16(common) else np.finfo(common).nmant + 1
        return mantissa >= bits
    return bool(np.can_cast(d, common, "safe"))


def is_bfloat16(dtype) -> bool:
    """True for ml_dtypes' bfloat16 (a dtype or its name)."""
    if isinstance(dtype, str):
        return dtype == "bfloat16"
    return dtype.kind == "V" and dtype.name == "bfloat16"


def numpy_dtype(name: str) -> np.dtype:
    """The NumPy dtype of a key dtype name; TypeError if bfloat16 is asked
    for without ml_dtypes."""
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError as exc:
            raise TypeError("sorting bfloat16 needs the ml_dtypes package "
                            "(pip install ml_dtypes)") from exc
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


@functools.lru_cache(maxsize=None)
def itemsize(name: str) -> int:
    """Width in bytes of a key dtype name, remembered: every Job asks (np.dtype
    of a name parses it each time). Needs no ml_dtypes for bfloat16."""
    return 2 if name == "bfloat16" else np.dtype(name).itemsize


def key_kind(dtype) -> int:
    """KIND_UNSIGNED, KIND_SIGNED or KIND_FLOAT for a supported key dtype."""
    if is_bfloat16(dtype if isinstance(dtype, str) else np.dtype(dtype)):
        return KIND_FLOAT
    dt = key_dtype(dtype)
    return {"u": KIND_UNSIGNED, "i": KIND_SIGNED, "f": KIND_FLOAT}[dt.kind]


def value_bytes(dtype, what: str = "values") -> int:
    """Width of a value payload; TypeError naming the value dtypes unless
    `dtype` is numeric (integer, float or complex) of 4 or 8 bytes. Kernels
    and the CPU move values as raw bytes, so any byte order serves."""
    dt = np.dtype(dtype)
    if dt.itemsize not in VALUE_BYTES or dt.kind not in VALUE_KINDS:
        raise unsupported_values(what, dt)
    return dt.itemsize


def unsupported_values(what: str, dtype) -> TypeError:
    """The error for values of `dtype` (any library's dtype object)."""
    return TypeError(f"{what}: dtype {dtype} is not supported; {VALUES_RULE}")
