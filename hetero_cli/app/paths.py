"""The one check of a path a command reads as an input file (an image, -i data, a JSON file of affinities,
configuration or Polygraphy inputs, labels): it must name a regular file, or a folder where one is taken.

A device such as /dev/zero never ends and a pipe can be read only once, so both are refused before
anything is read; a folder or a missing path is named as what it is, not as "no such file".
"""

from __future__ import annotations

import os
import stat


def file_problem(path: str | os.PathLike[str], *, folder: bool = False) -> str | None:
    """Why ``path`` cannot be read as an input file, None where it can: it does not exist, is a folder
    (unless ``folder``: a folder is taken too), is no regular file (a device, a pipe, a socket) or cannot
    be looked at. The reason starts with the path, for the caller to end with what would fix it.

    >>> file_problem("/dev/null")
    '/dev/null is not a regular file (a device, a pipe or a socket)'
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"{path}: no such file" + (" or folder" if folder else "")
    except NotADirectoryError:
        return f"{path}: no such file (a part of the path before it is a file, not a folder)"
    except OSError as exc:
        return f"cannot look at {path}: {(exc.strerror or str(exc)).lower()}"
    if stat.S_ISDIR(mode):
        return None if folder else f"{path} is a folder, not a file"
    if not stat.S_ISREG(mode):
        return f"{path} is not a regular file (a device, a pipe or a socket)"
    return None
