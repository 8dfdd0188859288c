"""Atomic writes of files and directories, and early checks that a target can be written.

Shared by model files (:mod:`cpgbn.io`), checkpoints (:mod:`cpgbn.inference.checkpoint`), the
HTML report and the command line.  A writer never leaves half a file: it writes a temporary
sibling and renames it into place; a directory is replaced only if it holds the caller's
``marker`` file (an earlier save), never deleted otherwise.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from .errors import CPGBNInputError

#: The marker file of a saved model directory (see :mod:`cpgbn.io`).
MODEL_MARKER = "model.json"


def _fsync_file(path: Path) -> None:
    with open(path, "rb") as fh:
        os.fsync(fh.fileno())


def write_file_atomically(path, write, *, binary: bool = False) -> Path:
    """Call ``write(fh)`` on a temporary sibling of ``path``, then rename it into place.

    The file gets the permissions of any new file (the umask applies, not the temporary
    file's private mode); on failure nothing is left behind.
    """
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    except OSError as exc:  # name the file the caller asked for, not the temporary one
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as fh:
            write(fh)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException as exc:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(exc, OSError) and exc.filename in (tmp, None):
            raise OSError(exc.errno, exc.strerror, str(path)) from exc
        raise
    return path


def check_file_target(path, option: str = "--out") -> None:
    """Raise :class:`CPGBNInputError` at once, before any long work, when ``path`` cannot
    become a file: it is a directory, or its nearest existing ancestor is not a writable
    directory.  (What only the write can tell, a full disk say, still fails then.)"""
    target = Path(path)
    if target.is_dir():
        raise CPGBNInputError(f"{option} {target} is a directory; give a file name")
    _check_creatable(target, option)


def _check_creatable(target: Path, option: str = "") -> None:
    """Raise unless the nearest existing ancestor of ``target`` is a writable directory."""
    existing = next(p for p in (target.parent, *target.parent.parents) if p.exists())
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        name = f"{option} {target}" if option else str(target)
        raise CPGBNInputError(f"{name}: cannot create it ({existing} is not a writable directory)")


def check_replaceable(directory, marker: str = MODEL_MARKER) -> None:
    """Raise unless ``directory`` is free or holds an earlier save (never delete anything else)."""
    target = Path(directory)
    if target.exists() and not (target.is_dir() and (target / marker).is_file()):
        kind = "file" if not target.is_dir() else "directory that is not a saved cpgbn model"
        raise CPGBNInputError(f"refusing to overwrite {target}: it is a {kind}; choose another path")
    _check_creatable(target)


def write_directory_atomically(directory, write, *, marker: str = MODEL_MARKER) -> None:
    """Call ``write(tmp_dir)`` then move ``tmp_dir`` into place at ``directory`` by rename.

    An existing ``directory`` is replaced only if it holds ``marker`` (i.e. it is an earlier
    save); anything else there is refused rather than deleted.
    """
    target = Path(directory)
    check_replaceable(target, marker)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.tmp-", dir=target.parent))
    except OSError as exc:  # name the directory the caller asked for, not the temporary one
        raise OSError(exc.errno, exc.strerror, str(target)) from exc
    try:
        write(tmp)
        for child in tmp.iterdir():
            _fsync_file(child)
        old = None
        if target.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.old-", dir=target.parent))
            os.rmdir(old)
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
