"""The code under test of the gpu-smoke example."""
