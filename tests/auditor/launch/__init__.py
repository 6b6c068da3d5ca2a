"""Tests of the launch backends: local GPUs and Slurm."""
