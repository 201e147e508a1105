"""Analyses that several rules share and that are not plain facts about Ray's API (those are in
`ray_lint.ray_api`): how often a loop runs, what a remote definition captures, what makes a numpy array,
what a value handed to `ray.get` / `ray.wait` provably is."""

from __future__ import annotations
