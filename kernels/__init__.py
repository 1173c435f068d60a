"""CUDA sources of cudasortkit (shipped as package data)."""
