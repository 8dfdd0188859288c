"""Download the paper's datasets from their public sources and convert them to ``label<TAB>text``.

``fetch("trec")`` downloads the original files from the dataset authors' pages, checks every
original file against the sha256 recorded in the data folder's README, converts them exactly as
that README describes and checks the converted content against the sha256 of the files in the
project's data folder (the sources, checks and conversion are in :mod:`cpgbn.datasets.sources`).
The result is byte-identical to those files (for IMDB the *decompressed* content is: our gzip
framing may differ from ``gzip -9 -n``).

Downloads use only the standard library: the bytes go to ``<name>.part`` first, an interrupted
download is continued with an HTTP ``Range`` request the next time, every socket operation has a
timeout, and the complete file is renamed into place.  Every failure is a one-line
:class:`~cpgbn.errors.DataFileError`; a file that fails its checksum is removed, and converted
files are written to temporary names and renamed only when all of them are complete and
verified, so nothing half-written is ever left under a dataset's folder.

``CPGBN_DOWNLOAD_MIRROR`` (or ``mirror=``) replaces every source URL by
``<mirror>/<file name>``: for a local copy of the original files, or a test server.
"""
from __future__ import annotations

import errno
import gzip
import http.client
import os
import re
import socket
import sys
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

from ..version import VERSION
from cpgbn.errors import CPGBNInputError, DataFileError, one_line
from cpgbn.datasets.registry import (ENV_VAR, SPECS, cache_dir, check_name, dataset_files,
                                     has_dataset)
from cpgbn.datasets.sources import SOURCES, Source, convert, read_originals

__all__ = ["DEFAULT_TIMEOUT", "MIRROR_ENV", "SOURCES", "Source", "convert", "download_file",
           "fetch", "target_dir"]

MIRROR_ENV = "CPGBN_DOWNLOAD_MIRROR"
DEFAULT_TIMEOUT = 60.0
DOWNLOADS = ".downloads"  # partial and complete downloads, inside the data directory
_CHUNK = 1 << 16
_USER_AGENT = f"cpgbn/{VERSION} (Python urllib; dataset download)"
_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


# ------------------------------------------------------------------------------------ fetch
def fetch(name: str, data_dir: str | os.PathLike | None = None, *, progress: bool = True,
          timeout: float = DEFAULT_TIMEOUT, mirror: str | None = None,
          force: bool = False) -> Path:
    """Download dataset ``name`` (mr, subj, trec, imdb; not elec) unless present; return the data
    folder.

    The files go to ``<data folder>/<NAME>/`` with the names ``load_dataset`` reads.  The data
    folder is ``data_dir``, else ``$CPGBN_DATA``, else the user cache (``$XDG_CACHE_HOME/cpgbn``
    or ``~/.cache/cpgbn``).  Nothing is downloaded when every file is already there (unless
    ``force``).  ``timeout`` (seconds) bounds every connection attempt and every read;
    ``mirror`` (default ``$CPGBN_DOWNLOAD_MIRROR``) is a base URL that replaces the sources'.
    ``progress`` shows progress bars and messages on stderr.
    """
    key = check_name(name)
    if key not in SOURCES:
        raise DataFileError(f"cpgbn cannot download {key}: put {', '.join(dataset_files(key))} "
                            f"from {SPECS[key].obtain} in <data folder>/{SPECS[key].folder}/ "
                            f"($CPGBN_DATA or --data-dir)")
    source = SOURCES[key]
    timeout = _check_timeout(timeout)
    root = target_dir(data_dir)
    if not force and has_dataset(root, key):
        return root
    if mirror is None:
        mirror = os.environ.get(MIRROR_ENV) or None
    say = _say if progress else (lambda message: None)
    downloads = root / DOWNLOADS
    _mkdir(downloads)
    files: list[Path] = []
    try:
        for url in source.urls:
            file_name = url.rsplit("/", 1)[-1]
            if mirror:
                url = mirror.rstrip("/") + "/" + file_name
            files.append(download_file(url, downloads / file_name, timeout=timeout,
                                       progress=progress))
        say(f"verifying and converting {', '.join(f.name for f in files)}")
        try:
            outputs = convert(key, read_originals(source, files), source=source)
        except DataFileError:
            for path in files:  # a bad download must not be used again
                path.unlink(missing_ok=True)
            raise
        _write_outputs(root / source.folder, outputs)
        for path in files:
            path.unlink(missing_ok=True)
    finally:
        _remove_if_empty(downloads)
    say(f"{key}: wrote {', '.join(outputs)} to {root / source.folder}")
    return root


def target_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """Where ``fetch`` puts a dataset: ``data_dir``, else ``$CPGBN_DATA``, else the user cache."""
    if data_dir is not None:
        return Path(data_dir)
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR])
    return cache_dir()


def _check_timeout(timeout) -> float:
    try:
        value = float(timeout)
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise CPGBNInputError(f"timeout must be a positive number of seconds, got {timeout!r}")
    return value


def _say(message: str) -> None:
    print(f"cpgbn: {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------- download
def download_file(url: str, dest: str | os.PathLike, *, timeout: float = DEFAULT_TIMEOUT,
                  progress: bool = True) -> Path:
    """Download ``url`` to ``dest`` through ``dest.part``, resuming a partial ``.part`` file.

    An existing ``dest`` is taken as complete.  A partial file is continued with a ``Range``
    request; a server that answers with the whole file restarts it.  On a network failure the
    ``.part`` file is kept for the next attempt; on a full disk it is removed.
    """
    dest = Path(dest)
    if dest.is_file():
        return dest
    part = dest.with_name(dest.name + ".part")
    for _attempt in range(2):  # a second attempt only after discarding an unusable .part
        offset = part.stat().st_size if part.is_file() else 0
        outcome = _download_once(url, part, offset, timeout, progress, dest.name)
        if outcome == "done":
            os.replace(part, dest)
            return dest
        part.unlink(missing_ok=True)  # "restart": the partial file does not fit the server's
    raise DataFileError(f"could not download {url}: the server does not resume the partial "
                        f"download; check your connection or pass --data-dir")


def _download_once(url: str, part: Path, offset: int, timeout: float, progress: bool,
                   label: str) -> str:
    headers = {"User-Agent": _USER_AGENT, "Accept-Encoding": "identity"}
    if offset:
        headers["Range"] = f"bytes={offset}-"
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                          timeout=timeout)
    except urllib.error.HTTPError as exc:
        with exc:
            if exc.code == 416 and offset:  # nothing after offset: complete, or a wrong file
                total = _range_total(exc.headers.get("Content-Range", ""))
                return "done" if total == offset else "restart"
            raise DataFileError(f"could not download {url}: HTTP {exc.code} "
                                f"{one_line(exc.reason)}; check the address or pass "
                                f"--data-dir") from None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        raise DataFileError(f"could not download {url}: {_reason(exc)}; check your "
                            f"connection or pass --data-dir") from None
    with response:
        status = getattr(response, "status", None) or 200  # file:// URLs have no status
        length = response.headers.get("Content-Length")
        expected = int(length) if length and length.isdigit() else None
        if status == 206:
            start, total = _content_range(response.headers.get("Content-Range", ""))
            if start != offset:
                return "restart"
            mode = "ab"
        else:
            offset, total, mode = 0, expected, "wb"
        done = 0
        read = getattr(response, "read1", response.read)  # whatever has arrived, not 64 KiB
        try:
            with open(part, mode) as handle, _progress_bar(label, total, offset, progress) as bar:
                while True:
                    try:
                        chunk = read(_CHUNK)
                    except (http.client.HTTPException, OSError) as exc:
                        raise DataFileError(
                            f"could not download {url}: {_reason(exc)} after "
                            f"{_bytes(offset + done)}; run the command again to resume, or "
                            f"check your connection") from None
                    if not chunk:
                        break
                    _write(handle, chunk)
                    done += len(chunk)
                    bar.update(len(chunk))
        except OSError as exc:
            part.unlink(missing_ok=True)
            _raise_write_error(exc, part)
    if expected is not None and done < expected:
        raise DataFileError(f"could not download {url}: the connection closed after "
                            f"{_bytes(offset + done)} of {_bytes(offset + expected)}; run the "
                            f"command again to resume")
    return "done"


def _write(handle, data: bytes) -> None:
    """Every byte this module writes goes through here (tests simulate a full disk)."""
    handle.write(data)


def _raise_write_error(exc: OSError, path: Path):
    if exc.errno in _NO_SPACE:
        raise DataFileError(f"disk full while writing {path}; free some space and run the "
                            f"command again") from None
    raise DataFileError(f"cannot write {path}: {exc.strerror or one_line(exc)}") from None


def _progress_bar(label: str, total: int | None, initial: int, enabled: bool):
    from ..progress import progress_bar

    return progress_bar(total=None if total is None else total, initial=initial, desc=label,
                        unit="B", unit_scale=True, unit_divisor=1024, enabled=enabled,
                        file=sys.stderr, dynamic_ncols=True)


def _content_range(value: str) -> tuple[int | None, int | None]:
    match = re.fullmatch(r"\s*bytes\s+(\d+)-\d+/(\d+|\*)\s*", value)
    if not match:
        return None, None
    return int(match[1]), None if match[2] == "*" else int(match[2])


def _range_total(value: str) -> int | None:
    match = re.fullmatch(r"\s*bytes\s+\*/(\d+)\s*", value)
    return int(match[1]) if match else None


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.URLError) and not isinstance(exc, urllib.error.HTTPError):
        if not isinstance(exc.reason, BaseException):
            return one_line(exc.reason)
        exc = exc.reason
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name ({exc.strerror or one_line(exc)}; offline?)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return one_line(exc)


def _bytes(n: int) -> str:
    return f"{n:,} bytes"


# --------------------------------------------------------------------------------- writing
def _write_outputs(folder: Path, outputs: dict[str, bytes]) -> None:
    """Write every output to a temporary file, then rename them all into place."""
    _mkdir(folder)
    temporary: dict[Path, Path] = {}
    try:
        for name, content in outputs.items():
            path = folder / name
            if name.endswith(".gz"):
                content = gzip.compress(content, compresslevel=9, mtime=0)
            fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".part", dir=folder)
            os.close(fd)
            temporary[path] = Path(tmp)
            try:
                with open(tmp, "wb") as handle:
                    _write(handle, content)
            except OSError as exc:
                _raise_write_error(exc, path)
        for path, tmp in temporary.items():
            os.replace(tmp, path)
    finally:
        for tmp in temporary.values():
            tmp.unlink(missing_ok=True)


def _mkdir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno in _NO_SPACE:
            raise DataFileError(f"disk full while creating {path}") from None
        raise DataFileError(f"cannot create {path}: {exc.strerror or one_line(exc)}") from None


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass

