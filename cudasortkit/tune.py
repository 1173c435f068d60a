"""`python -m cudasortkit.tune`: the tuner's command line, which lives in
cudasortkit/cli/tune.py (`python -m cudasortkit tune` is the same)."""
import sys

from .cli.tune import main

if __name__ == "__main__":
    sys.exit(main())
