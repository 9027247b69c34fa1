"""The reliability suite (issue 7): real processes killed at random, many at once, faults and bad input.

``pytest tests/reliability`` runs the short mode; ``python -m tests.reliability.stress
--minutes N`` runs the same scenarios for hours.  See docs/guarantees.md.
"""
