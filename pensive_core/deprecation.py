"""Names kept one release after a rename, with a :class:`DeprecationWarning` that points at
the caller's line (a module's ``__getattr__`` returns :func:`renamed`)."""

from __future__ import annotations

import warnings
from typing import Any

__all__ = ["renamed"]


def renamed(module: str, old: str, new: str, obj: Any) -> Any:
    """``obj``, with a warning that ``module.old`` is now ``new``; for a module-level
    ``__getattr__`` (the warning names the line that used the old name).

    Args:
        module: The module the old name was read from (``__name__``).
        old: The old name.
        new: The name to use instead.
        obj: What the new name is.
    """
    warnings.warn(
        f"{module.split('.')[0]}.{old} is deprecated: use {new} (the old name is removed in "
        "the next release)",
        DeprecationWarning,
        stacklevel=3,  # (this function, the module's __getattr__, the caller)
    )
    return obj
