"""ray-lint's rules, one module each. Installed as `ray_lint.rules`; see `ray_lint.rule.Rule`."""
