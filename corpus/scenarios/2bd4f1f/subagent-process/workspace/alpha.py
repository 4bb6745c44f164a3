def alpha(values):
    """Return the sum of the squares of values."""
    return sum(v * v for v in values)
