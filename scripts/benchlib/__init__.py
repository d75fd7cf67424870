"""Helpers of scripts/bench (performance benchmarks, issue 4); see that script."""
