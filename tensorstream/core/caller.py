"""Warnings attributed to the user's line, not to the library's.

A fixed ``stacklevel`` is right for one call path only: the same warning is reached through
``fit`` and ``partial_fit``, through the thread-limit wrapper of every public method, through a
stream loop, so a fixed level pointed inside the package (``learners/_base.py``) on most paths.
:func:`warn` counts the frames instead: the warning is attributed to the first frame outside
the package, the line of the user's code that called into it.
"""

import os
import sys
import warnings

#: the package's folder as its modules' code names it (as imported) and absolute; one
#: ``startswith`` per frame: a step that warns stays as cheap as one that does not
_PACKAGE = tuple({os.path.dirname(os.path.dirname(path)) + os.sep
                  for path in (__file__, os.path.abspath(__file__))})


def caller_stacklevel() -> int:
    """The ``stacklevel`` that names, for a ``warnings.warn`` made by the caller of this
    function's caller, the first frame outside the package (1 names the ``warn`` line)."""
    frame, level = sys._getframe(2), 2  # level 2: the frame that called warn()
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def warn(message: str, category: type[Warning] = UserWarning) -> None:
    """``warnings.warn(message, category)`` at the first line outside the package.

    Parameters
    ----------
    message : str
        The warning's text.
    category : type of Warning, default UserWarning
        Its class (a filter or ``pytest.warns`` selects on it).
    """
    warnings.warn(message, category, stacklevel=caller_stacklevel())
