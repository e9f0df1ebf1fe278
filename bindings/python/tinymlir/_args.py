"""Checks for the plain Python arguments of the package's functions: integers, real numbers
and flags.

Each returns the value converted for the C API or raises TypeError/ValueError naming the
parameter and the value. Integers follow operator.index (ints and NumPy integers; a float
such as 6.9 or a str such as "3" is refused rather than truncated or parsed), as NumPy does
for axes and shapes; bool is refused too, as NumPy refuses it for axes and shapes (True is
not an axis).
"""
import numbers
import operator

import numpy as np


def index_arg(value, name):
    """An integer parameter, by operator.index (bool refused)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be an integer, not bool ({value!r})")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__} "
                        f"({value!r})") from None


def real_arg(value, name):
    """A float parameter: a real number (int, float, NumPy number; not a str or a bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, not {type(value).__name__} "
                        f"({value!r})")
    return float(value)


def flag_arg(value, name):
    """A flag for a C int: a bool, or the ints 0 and 1; as 0 or 1."""
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    try:
        flag = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be a bool, not {type(value).__name__} "
                        f"({value!r})") from None
    if flag not in (0, 1):
        raise ValueError(f"{name} must be a bool (or 0 or 1), not {flag}")
    return flag
