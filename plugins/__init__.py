"""Built-in algorithms, one class per module, registered through the same
``cudasortkit.algorithms`` entry points as third-party plugins (setup.cfg)."""
