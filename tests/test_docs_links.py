"""The documentation's links resolve, and the project's text speaks of the
project only (CPU only, no GPU, no imports of the package).

- Every relative link of README.md and docs/**/*.md (`[text](target)` and
  images) names a file that exists, and an anchor (`page.md#part`, `#part`)
  names a heading of that page, by GitHub's rule for heading anchors.
- Every page of docs/ is reachable from docs/index.md.
- No file of the docs, the package, the plugins, the kernels or the tools
  names a work session or an issue number: measured figures say their
  device, date and version (docs/benchmarks.md) instead.
"""
from __future__ import annotations

import functools
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOCS = os.path.join(ROOT, "docs")

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^\s*(```|~~~)")
INLINE_CODE = re.compile(r"`[^`]*`")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
DIARY = re.compile(r"session [0-9]+|issue #?[0-9]+", re.IGNORECASE)


def markdown_files() -> list:
    files = [os.path.join(ROOT, "README.md")]
    for folder, _, names in os.walk(DOCS):
        files += [os.path.join(folder, n) for n in sorted(names) if n.endswith(".md")]
    return sorted(files)


def prose_lines(path: str):
    """(line number, text) of a page outside fenced code blocks, with
    inline code taken out (a link inside backticks is not a link)."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield number, INLINE_CODE.sub("", line)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text without markup, lower case,
    punctuation dropped (letters, digits, spaces, '-' and '_' kept), each
    space a '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = text.replace("`", "").replace("*", "")
    text = "".join(c for c in text.lower() if c.isalnum() or c in " -_")
    return text.replace(" ", "-")


@functools.lru_cache(maxsize=None)
def anchors(path: str) -> frozenset:
    """Every heading anchor of a page (repeats get -1, -2, ... as on GitHub)."""
    seen: dict = {}
    out = set()
    fenced = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if FENCE.match(line):
                fenced = not fenced
                continue
            m = None if fenced else HEADING.match(line)
            if m:
                base = slug(m.group(2))
                count = seen.get(base, 0)
                seen[base] = count + 1
                out.add(base if count == 0 else f"{base}-{count}")
    return frozenset(out)


def links(path: str):
    """(line number, target) of every relative link of a page."""
    for number, line in prose_lines(path):
        for m in LINK.finditer(line):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.IGNORECASE):
                continue  # http:, https:, mailto: ...
            yield number, target


def broken_links(path: str) -> list:
    out = []
    for number, target in links(path):
        file_part, _, anchor = target.partition("#")
        where = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
            if file_part else path
        name = f"{os.path.relpath(path, ROOT)}:{number}: {target}"
        if not os.path.exists(where):
            out.append(f"{name} (no such file)")
        elif anchor and where.endswith(".md") and anchor not in anchors(where):
            out.append(f"{name} (no heading '#{anchor}' there)")
    return out


def test_the_slugs_follow_githubs_rule():
    assert slug("Checking the result: `--check`") == "checking-the-result---check"
    assert slug("Repeated calls (prepared calls)") == "repeated-calls-prepared-calls"
    assert slug("Measured choice for selection, multikey and search") == \
        "measured-choice-for-selection-multikey-and-search"
    assert slug("The collective sort: `exchange=\"nccl\"`") == "the-collective-sort-exchangenccl"


def test_a_broken_link_is_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# Title\n\n[ok](#title) [gone](missing.md) [no part](#nowhere)\n"
                    "`[code](not-a-link.md)`\n```\n[fenced](not-a-link-either.md)\n```\n")
    found = broken_links(str(page))
    assert len(found) == 2
    assert "missing.md (no such file)" in found[0]
    assert "#nowhere" in found[1]


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_every_relative_link_resolves(path):
    assert broken_links(path) == []


def test_every_docs_page_is_reachable_from_the_index():
    index = os.path.join(DOCS, "index.md")
    reached, todo = {index}, [index]
    while todo:
        page = todo.pop()
        for _, target in links(page):
            file_part = target.partition("#")[0]
            if not file_part.endswith(".md"):
                continue
            where = os.path.normpath(os.path.join(os.path.dirname(page), file_part))
            if where.startswith(DOCS) and os.path.exists(where) and where not in reached:
                reached.add(where)
                todo.append(where)
    pages = {p for p in markdown_files() if p.startswith(DOCS)}
    assert sorted(os.path.relpath(p, ROOT) for p in pages - reached) == []


def text_files():
    for top in ("README.md", "docs", "cudasortkit", "plugins", "kernels", "tools", "examples",
                "setup.cfg", "setup.py"):
        where = os.path.join(ROOT, top)
        if os.path.isfile(where):
            yield where
        for folder, dirs, names in os.walk(where):
            dirs[:] = [d for d in dirs if d != "__pycache__" and not d.endswith(".egg-info")]
            for n in names:
                if n.endswith((".md", ".py", ".cu", ".cuh", ".sh", ".cfg", ".txt", ".toml")):
                    yield os.path.join(folder, n)


def test_no_text_names_a_work_session_or_an_issue_number():
    found = []
    for path in text_files():
        with open(path, encoding="utf-8", errors="replace") as f:
            for number, line in enumerate(f, 1):
                if DIARY.search(line):
                    found.append(f"{os.path.relpath(path, ROOT)}:{number}: {line.strip()[:100]}")
    assert found == []
