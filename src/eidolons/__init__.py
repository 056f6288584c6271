"""eidolons: mechanical integrity and contract gates for ECL hand-offs."""

__version__ = "0.1.0"
