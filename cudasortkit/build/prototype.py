"""pycuda argument letters of a kernel, read from its own `__global__` prototype.

pycuda's prepare() wants one struct letter per kernel parameter. Instead of
typing them beside each .cu file, the core reads them from the kernel's
declaration in the rendered source (and the headers it includes with
quotes), the way PyCUDA's ElementwiseKernel derives them from its argument
list::

    extern "C" __global__ void __launch_bounds__(BLOCK_SIZE)
    scatter(const csk_bits_t* __restrict__ keys, csk_index_t n, unsigned long long mask)
    -> "PqQ"

Every pointer (any `*` or array `[]`) is "P"; scalars must be spelled as one
of SCALAR_LETTERS (qualifiers such as const, volatile and __restrict__ are
ignored). Comments, line breaks, line continuations, macros between the
return type and the name (MERGE_BOUNDS, `__launch_bounds__(...)`) and
`extern "C" { ... }` blocks are handled. A kernel's name must be written out:
one made by token pasting inside a macro (`kernel##S`) has no prototype to
read.

A kernel's prototype also says whether it may be launched overlapping the
grid before it: OVERLAP_MARK before its name (kernels/include/overlap.cuh).
"""
from __future__ import annotations

import functools
import os
import re

from ..errors import KernelSignatureError

#: Scalar parameter types and their pycuda (struct) letters.
SCALAR_LETTERS = {
    "int": "i", "signed": "i", "signed int": "i", "int32_t": "i",
    "unsigned": "I", "unsigned int": "I", "uint32_t": "I",
    "long long": "q", "long long int": "q", "signed long long": "q",
    "signed long long int": "q", "int64_t": "q", "csk_index_t": "q",
    "unsigned long long": "Q", "unsigned long long int": "Q", "uint64_t": "Q", "u64": "Q",
    "size_t": "Q",
    "float": "f", "double": "d",
}
#: Words that qualify a parameter without changing its letter.
QUALIFIERS = frozenset({"const", "volatile", "__restrict__", "__restrict", "restrict",
                        "__grid_constant__", "register"})

# String and character literals are kept whole (so `"//"` is not a comment).
_LITERAL_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/',
                                 re.S)
_GLOBAL = re.compile(r"\b__global__\b")
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
_WORD = re.compile(r"[A-Za-z_]\w*")
_CALL = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
_OPEN, _CLOSE = "([<", ")]>"


def argument_letters(source: str, kernel: str, include_dirs=()) -> str:
    """The pycuda letters of `kernel`'s parameters, from its `__global__`
    prototype in `source` or in a header it includes with quotes (looked up
    in `include_dirs`). KernelSignatureError when the kernel is not declared,
    its declarations disagree or a parameter has a type with no letter."""
    lists = []
    for text in _texts(source, tuple(include_dirs)):
        lists.extend(params for _, params in prototypes(text).get(kernel, ()))
    if not lists:
        raise KernelSignatureError(
            f"kernel {kernel!r}: no __global__ prototype found in the rendered source or the "
            f"headers it includes (write the kernel's name out: names made with ## in a "
            f"macro cannot be read)")
    found = {_letters(kernel, params) for params in lists}
    if len(found) > 1:
        raise KernelSignatureError(
            f"kernel {kernel!r}: its prototypes disagree ({', '.join(sorted(found))}); "
            f"keep one parameter list")
    return found.pop()


def strip_comments(text: str) -> str:
    """`text` with line continuations joined and comments blanked out
    (line breaks kept)."""
    text = text.replace("\\\r\n", "").replace("\\\n", "")

    def blank(match):
        s = match.group(0)
        if s.startswith("//"):
            return " "
        if s.startswith("/*"):
            return " " + "\n" * s.count("\n")
        return s

    return _LITERAL_OR_COMMENT.sub(blank, text)


#: The mark of a kernel that may be launched overlapping the grid before it
#: (kernels/include/overlap.cuh), written in its prototype before its name.
OVERLAP_MARK = "CSK_OVERLAPPED"


def overlapped(source: str, kernel: str, include_dirs=()) -> bool:
    """Whether `kernel`'s `__global__` prototype (in `source` or a header it
    includes with quotes) names OVERLAP_MARK before the kernel's name."""
    return any(OVERLAP_MARK in _WORD.findall(head)
               for text in _texts(source, tuple(include_dirs))
               for head, _ in prototypes(text).get(kernel, ()))


@functools.lru_cache(maxsize=64)
def prototypes(text: str) -> dict:
    """name -> (head, parameter list) of every `__global__` declaration in
    `text` (comments already stripped): what stands between `__global__` and
    the name, and the text between the parentheses. The parameter list is
    the declaration's last parenthesised group, so macros with arguments
    may stand before the name."""
    found = {}
    for match in _GLOBAL.finditer(text):
        head = _declaration(text, match.end())
        calls = [m for m in _CALL.finditer(head) if _depth(head, m.start()) == 0]
        if calls:
            name = calls[-1]
            found.setdefault(name.group(1), []).append(
                (head[:name.start()], _group(head, name.end() - 1, name.group(1))))
    return found


def _texts(source: str, include_dirs: tuple):
    """The source, then each header it includes with quotes that lies in
    include_dirs (breadth first, each once), comments stripped."""
    yield strip_comments(source)
    for _, text in headers(source, include_dirs):
        yield text


def headers(source: str, include_dirs) -> list:
    """(real path, text with comments stripped) of every header `source`
    includes with quotes, directly or through another such header, found in
    `include_dirs` (the first directory that has it, as nvcc's -I order):
    breadth first, each once. A header found in none of them (a system or
    CUDA header) is left out. Headers are read again when they change."""
    include_dirs = tuple(include_dirs)
    found, seen = [], set()
    pending = [strip_comments(source)]
    while pending:
        text = pending.pop(0)
        for name in _INCLUDE.findall(text):
            path = next((os.path.join(d, name) for d in include_dirs
                         if os.path.isfile(os.path.join(d, name))), None)
            if path is None:
                continue
            real = os.path.realpath(path)
            if real not in seen:
                seen.add(real)
                header = _header(real, os.stat(real).st_mtime_ns)
                found.append((real, header))
                pending.append(header)
    return found


@functools.lru_cache(maxsize=64)
def _header(path: str, mtime_ns: int) -> str:
    """A header's text, comments stripped (read again when it changes)."""
    with open(path, encoding="utf-8") as f:
        return strip_comments(f.read())


def _depth(text: str, at: int) -> int:
    """Parenthesis depth at text[at]."""
    return text.count("(", 0, at) - text.count(")", 0, at)


def _declaration(text: str, start: int) -> str:
    """text from start up to the body's `{` or the declaration's `;`
    (outside parentheses)."""
    depth = 0
    for i in range(start, len(text)):
        c = text[i]
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
        elif depth <= 0 and c in "{;":
            return text[start:i]
    return text[start:]


def _group(text: str, open_at: int, kernel: str) -> str:
    """The text inside the parentheses that open at text[open_at]."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[open_at + 1:i]
    raise KernelSignatureError(f"kernel {kernel!r}: its parameter list is not closed")


def _split(params: str) -> list:
    """Parameters at top level (commas inside (), [] or <> do not split)."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(params):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(params[start:i])
            start = i + 1
    parts.append(params[start:])
    return [" ".join(p.split()) for p in parts]


def _letters(kernel: str, params: str) -> str:
    parts = _split(params)
    if parts == [""] or parts == ["void"]:
        return ""
    return "".join(_letter(kernel, i, p) for i, p in enumerate(parts, 1))


def _letter(kernel: str, index: int, param: str) -> str:
    """The letter of one parameter (its default value, if any, ignored)."""
    decl = param.split("=", 1)[0].strip()
    if "*" in decl or "[" in decl:
        return "P"
    words = [w for w in _WORD.findall(decl) if w not in QUALIFIERS]
    for typename in (" ".join(words), " ".join(words[:-1])):  # without a name, then with one
        if typename in SCALAR_LETTERS and "&" not in decl:
            return SCALAR_LETTERS[typename]
    shown = " ".join(words[:-1]) if len(words) > 1 else " ".join(words) or decl
    raise KernelSignatureError(
        f"kernel {kernel!r}: parameter {index} ({decl!r}) has type {shown!r}, which has no "
        f"pycuda argument letter; pass a pointer or one of: {', '.join(sorted(SCALAR_LETTERS))}")
