"""Analyses that several rules share: judgements built on the model's facts, not facts themselves.

The layers, read in this order: `ray_lint.python_model` (the walk and Python facts, nothing of Ray),
`ray_lint.model` (`SemanticModel`: the Ray facts on top), then these modules, plain functions of the model
that keep any per-file memo in `model.analysis(...)`; facts about Ray's API itself are in `ray_lint.ray_api`.
How often a loop runs (`loops`), whether its iterations depend on each other (`loop_dependence`), whether an
actor keeps state between calls (`actor_state`), what a remote definition captures (`captures`), what makes
a numpy array (`arrays`), what a value handed to `ray.get` / `ray.wait` provably is (`ref_arguments`)."""

from __future__ import annotations
