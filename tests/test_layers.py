"""The layers of cudasortkit, read from its source (no import runs): every
module of the package and of the built-in plugins, each import between them
(at module level or inside a function: both are dependencies), the modules
grouped into rooms, and the rooms into floors.

A room is a subpackage (cudasortkit/calls/, ...; the top-level plugins/ and
kernels/ install as cudasortkit.plugins and cudasortkit.kernels) or a
top-level module of the package (api, settings, ...). Two exceptions, where
the design draws one piece: the package's face (cudasortkit/__init__.py,
re-exporting the public functions) is in api's room, and the `python -m`
doors (cudasortkit/__main__.py, cudasortkit/tune.py: a line each that calls
cli) are in cli's. The rules the code keeps:

- no circle between rooms (a room may import itself);
- no import up: LADDER lists the rooms from the top down, and a room imports
  only rooms below it on the ladder;
- the built-in plugins reach the core through the sdk (and the leaf modules
  the plugin guide names): PLUGIN_REACH;
- at most MAX_FLOORS floors: a room that imports none is on the ground floor
  (0), any other one floor above the highest room it imports; so the top
  floor's number is the count of imports on the longest chain of rooms.

`python tests/test_layers.py` prints the rooms by floor and the longest chain.
"""
import ast
import os
import sys
from functools import lru_cache

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "cudasortkit"
#: Where each package's source lives (setup.cfg's package_dir).
SOURCES = {PACKAGE: os.path.join(ROOT, PACKAGE),
           f"{PACKAGE}.plugins": os.path.join(ROOT, "plugins"),
           f"{PACKAGE}.kernels": os.path.join(ROOT, "kernels")}
#: The most floors the longest chain of rooms may climb.
MAX_FLOORS = 10
#: The rooms from the top down: each imports only rooms after it (a room not
#: listed fails the test, so a new one is placed on purpose).
LADDER = ("cli", "dask", "api", "testing", "calls", "tuning",
          "dispatch", "host", "launch", "plugins", "sdk", "build", "kernels", "gpu",
          "settings", "order", "dtypes", "errors", "version")
#: What the built-in plugins may import besides each other.
PLUGIN_REACH = {"sdk", "dtypes", "order", "errors"}
#: Modules drawn into another room (see the module docstring).
ROOM_OF = {PACKAGE: "api", f"{PACKAGE}.__main__": "cli", f"{PACKAGE}.tune": "cli"}


def modules() -> dict:
    """Module name -> source file, for every module of the package and of
    the plugins and kernels it installs."""
    found = {}
    for package, top in SOURCES.items():
        for folder, dirs, files in os.walk(top):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            rel = os.path.relpath(folder, top)
            parts = [package] + ([] if rel == "." else rel.split(os.sep))
            if folder != top and ".".join(parts) in SOURCES:
                continue  # (a package with its own source folder)
            if "__init__.py" not in files:
                continue
            for name in files:
                if name.endswith(".py"):
                    mod = parts + ([] if name == "__init__.py" else [name[:-3]])
                    found[".".join(mod)] = os.path.join(folder, name)
    return found


def imports(name: str, path: str, known: dict) -> set:
    """The package's modules that module `name` (source `path`) imports: for
    `from X import y`, X.y where that is a module, else X."""
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[:len(up) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            for alias in node.names:
                out.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {m for m in out if m in known and m != name}


def room(module: str) -> str:
    """`cudasortkit.calls.sort_plan` -> "calls"; `cudasortkit.api` -> "api"."""
    return ROOM_OF.get(module) or module.split(".")[1]


@lru_cache(maxsize=1)
def graph() -> tuple:
    """(module edges {module: imported modules}, room edges {room: rooms})."""
    known = modules()
    edges = {name: imports(name, path, known) for name, path in known.items()}
    rooms = {room(m): set() for m in known}
    for m, targets in edges.items():
        rooms[room(m)].update(room(t) for t in targets if room(t) != room(m))
    return edges, rooms


def floors(rooms: dict) -> dict:
    """Room -> floor (0 for a room that imports none, else 1 + the highest
    floor it imports); raises ValueError on a circle."""
    floor, visiting = {}, set()

    def visit(r):
        if r in floor:
            return floor[r]
        if r in visiting:
            raise ValueError(f"circle through {r}")
        visiting.add(r)
        floor[r] = 1 + max((visit(t) for t in rooms[r]), default=-1)
        visiting.discard(r)
        return floor[r]

    for r in rooms:
        visit(r)
    return floor


def longest_chain(rooms: dict, floor: dict) -> list:
    """One chain of rooms from the top floor down to the ground floor."""
    top = max(floor, key=floor.get)
    chain = [top]
    while floor[chain[-1]] > 0:
        chain.append(max(rooms[chain[-1]], key=floor.get))
    return chain


def witnesses(source_room: str, target_room: str) -> list:
    """The module imports that make room `source_room` import `target_room`."""
    edges, _ = graph()
    return sorted(f"{m} -> {t}" for m, ts in edges.items() if room(m) == source_room
                  for t in ts if room(t) == target_room)


def test_the_source_is_read():
    edges, rooms = graph()
    assert {"calls", "dispatch", "launch", "build", "sdk", "gpu", "plugins", "kernels",
            "api", "cli", "settings", "dtypes"} <= set(rooms)
    assert room(f"{PACKAGE}.__main__") == "cli" and room(PACKAGE) == "api"
    assert f"{PACKAGE}.calls.sort_plan" in edges and f"{PACKAGE}.plugins.onesweep" in edges
    assert f"{PACKAGE}.sdk.sweep" in edges[f"{PACKAGE}.plugins.onesweep"]
    assert f"{PACKAGE}.calls.sort_plan" in edges[f"{PACKAGE}.api"]  # (from .calls.sort_plan import)


def test_every_room_has_a_place_on_the_ladder():
    _, rooms = graph()
    assert set(rooms) <= set(LADDER), sorted(set(rooms) - set(LADDER))


def test_no_circle_between_rooms():
    _, rooms = graph()
    floors(rooms)  # raises on a circle


def test_no_import_runs_up_the_ladder():
    _, rooms = graph()
    up = [f"{r} -> {t}: {witnesses(r, t)}" for r, targets in rooms.items() for t in targets
          if LADDER.index(t) < LADDER.index(r)]
    assert not up, "\n".join(up)


def test_plugins_reach_the_core_through_the_sdk():
    _, rooms = graph()
    beyond = rooms["plugins"] - PLUGIN_REACH
    assert not beyond, [witnesses("plugins", t) for t in sorted(beyond)]


def test_at_most_max_floors():
    _, rooms = graph()
    floor = floors(rooms)
    chain = longest_chain(rooms, floor)
    assert max(floor.values()) == len(chain) - 1
    assert len(chain) - 1 <= MAX_FLOORS, " -> ".join(chain)


def test_the_rules_can_fail():
    """The checks find a circle, an import up and a chain too long."""
    rooms = {"a": {"b"}, "b": {"a"}}
    try:
        floors(rooms)
    except ValueError as exc:
        assert "circle" in str(exc)
    else:
        raise AssertionError("no circle found")
    tall = {str(i): {str(i + 1)} for i in range(MAX_FLOORS + 1)}
    tall[str(MAX_FLOORS + 1)] = set()
    floor = floors(tall)
    assert max(floor.values()) == MAX_FLOORS + 1 and len(longest_chain(tall, floor)) == MAX_FLOORS + 2
    assert LADDER.index("api") < LADDER.index("calls") < LADDER.index("gpu")


if __name__ == "__main__":
    _, rooms = graph()
    floor = floors(rooms)
    for f in sorted(set(floor.values()), reverse=True):
        print(f"floor {f:2}: " + ", ".join(sorted(r for r in floor if floor[r] == f)))
    print(f"{len(rooms)} rooms, top floor {max(floor.values())}; longest chain: "
          + " -> ".join(longest_chain(rooms, floor)))
    sys.exit(0)
