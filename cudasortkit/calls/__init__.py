"""The sort family's calls above dispatch: along an axis (axes), merges, and
prepared repeats of a call."""
