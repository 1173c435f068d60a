"""What plugin authors build on: the plugin base classes, the job a GPU plugin
runs, the registry, segments, and the shared scan and radix-sweep primitives."""
