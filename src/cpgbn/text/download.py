"""Download the paper's datasets from their public sources and convert them to ``label<TAB>text``.

``fetch("trec")`` downloads the original files from the dataset authors' pages, checks every
original file against the sha256 recorded in the data folder's README, converts them exactly as
that README describes (decoding, label order, file order, collapsing runs of tab/line-break
characters to one space) and checks the converted content against the sha256 of the files in
the project's data folder.  The result is byte-identical to those files (for IMDB the
*decompressed* content is: our gzip framing may differ from ``gzip -9 -n``).

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
import hashlib
import http.client
import os
import re
import socket
import sys
import tarfile
import tempfile
import urllib.error
import urllib.request
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from cpgbn._version import __version__
from cpgbn.errors import CPGBNInputError, DataFileError
from cpgbn.text.datasets import DATASETS, ENV_VAR, cache_dir, has_dataset

__all__ = ["DEFAULT_TIMEOUT", "MIRROR_ENV", "SOURCES", "Source", "convert", "download_file",
           "fetch", "target_dir"]

MIRROR_ENV = "CPGBN_DOWNLOAD_MIRROR"
DEFAULT_TIMEOUT = 60.0
DOWNLOADS = ".downloads"  # partial and complete downloads, inside the data directory
_CHUNK = 1 << 16
_USER_AGENT = f"cpgbn/{__version__} (Python urllib; dataset download)"
_NO_SPACE = {errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)}


@dataclass(frozen=True)
class Source:
    """Where a dataset comes from and what its original and converted files must hash to."""

    folder: str
    urls: tuple[str, ...]
    #: role -> (path of the original file: a downloaded file's name or a member of a
    #: downloaded archive, matched at the end of the member's path; a path ending in "/" is a
    #: folder of ``<id>_<rating>.txt`` files), sha256 of its bytes (None: checked otherwise)
    members: dict[str, tuple[str, str | None]]
    #: converted file -> sha256 of its content (decompressed for .gz), or None
    outputs: dict[str, str | None]
    size: str  # approximate download size, for messages
    per_class: int = 0  # IMDB: reviews in every split/class folder
    home: str = field(default="", compare=False)  # the page that documents the data


_CORNELL = "https://www.cs.cornell.edu/people/pabo/movie-review-data/"
_COGCOMP = "https://cogcomp.seas.upenn.edu/Data/QA/QC/"

#: The sha256 values of the original files are those of the data folder's README; the output
#: values are those of the converted files there (IMDB: of the decompressed .tsv content).
SOURCES: dict[str, Source] = {
    "mr": Source(
        "MR", (_CORNELL + "rt-polaritydata.tar.gz",),
        {"pos": ("rt-polaritydata/rt-polarity.pos",
                 "d79ef14009bbf87cd6be21f91c3ea1a3cbcb73b34dfb4231aef7bbcd7677abc4"),
         "neg": ("rt-polaritydata/rt-polarity.neg",
                 "4af43bf489620b498a0852c5a8c6a535155dec7985fdfea782b8f7756b957ccc")},
        {"all.tsv": "23067a50433bfe2fdeeb20e83b5e87a02f8eddc4c68cada3ac2950219b94c2ad"},
        "0.5 MB", home=_CORNELL),
    "subj": Source(
        "SUBJ", (_CORNELL + "rotten_imdb.tar.gz",),
        {"subj": ("quote.tok.gt9.5000",
                  "73a2dcf8dc3cbcc7f068a70ef9f021c86b2a8e4dac81566b7fd015b3e938f2c5"),
         "obj": ("plot.tok.gt9.5000",
                 "5ddc9b44dc60d64d651347fcd7bdd489b0c70661e3f768215c16eea36f51204a")},
        {"all.tsv": "7d944547b028e587233d9a16ec2b9b844ed100fa96c956bc262b2d161ad720f2"},
        "0.5 MB", home=_CORNELL),
    "trec": Source(
        "TREC", (_COGCOMP + "train_5500.label", _COGCOMP + "TREC_10.label"),
        {"train": ("train_5500.label",
                   "9e4c8bdcaffb96ed61041bd64b564183d52793a8e91d84fc3a8646885f466ec3"),
         "test": ("TREC_10.label",
                  "033f22c028c2bbba9ca682f68ffe204dc1aa6e1cf35dd6207f2d4ca67f0d0e8e")},
        {"train.tsv": "0c35c0ad80b2667b10ce8f0beab4e4e6aa72e13bbc3c6b3ffcb10def7fb6428b",
         "test.tsv": "bc8b9b5aaa3617167b8ff2a5a7028bb7e8a8fb0fc06162a7db9b15566cc0424d",
         "train_fine.tsv": "4428b0118135b9122ac9671f66fe7fd45c61b08beacb591ddbdc2a1a09ea5834",
         "test_fine.tsv": "362f949499f30ea9c006498007971397ad6c9a46c75d598ce7b5729673785de3"},
        "0.4 MB", home=_COGCOMP),
    "imdb": Source(
        "IMDB", ("https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz",),
        {f"{split}/{label}": (f"aclImdb/{split}/{label}/", None)
         for split in ("train", "test") for label in ("pos", "neg")},
        {"train.tsv.gz": "c8661206ee35da94ee352246b28bc901d83b417abccc65b6b48612e5f99b1824",
         "test.tsv.gz": "dae53d8bb26daff3a8056f8e1b7e6f790643598689a47c8d7f8827a83b2af573"},
        "84 MB", per_class=12500, home="https://ai.stanford.edu/~amaas/data/sentiment/"),
}

# Runs of these characters inside a text become one space (the data README's rule 2).
_BREAKS = re.compile("[\t\n\r\v\f\x1c-\x1e\x85\u2028\u2029]+")
_REVIEW = re.compile(r"(\d+)_(\d+)\.txt")


# ------------------------------------------------------------------------------------ fetch
def fetch(name: str, data_dir: str | os.PathLike | None = None, *, progress: bool = True,
          timeout: float = DEFAULT_TIMEOUT, mirror: str | None = None,
          force: bool = False) -> Path:
    """Download dataset ``name`` (mr, subj, trec, imdb) unless present; return the data folder.

    The files go to ``<data folder>/<NAME>/`` with the names ``load_dataset`` reads.  The data
    folder is ``data_dir``, else ``$CPGBN_DATA``, else the user cache (``$XDG_CACHE_HOME/cpgbn``
    or ``~/.cache/cpgbn``).  Nothing is downloaded when every file is already there (unless
    ``force``).  ``timeout`` (seconds) bounds every connection attempt and every read;
    ``mirror`` (default ``$CPGBN_DOWNLOAD_MIRROR``) is a base URL that replaces the sources'.
    ``progress`` shows progress bars and messages on stderr.
    """
    key = _check_name(name)
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
            outputs = convert(key, _read_originals(source, files), source=source)
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


def _check_name(name) -> str:
    key = name.lower() if isinstance(name, str) else None
    if key not in SOURCES:
        raise DataFileError(f"unknown dataset {name!r}; known: {', '.join(DATASETS)}")
    return key


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
                                f"{_one_line(exc.reason)}; check the address or pass "
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
    raise DataFileError(f"cannot write {path}: {exc.strerror or _one_line(exc)}") from None


def _progress_bar(label: str, total: int | None, initial: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=None if total is None else total, initial=initial, desc=label,
                unit="B", unit_scale=True, unit_divisor=1024, disable=not enabled,
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
            return _one_line(exc.reason)
        exc = exc.reason
    if isinstance(exc, (TimeoutError, socket.timeout)):
        return "timed out"
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve the host name ({exc.strerror or _one_line(exc)}; offline?)"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return _one_line(exc)


def _one_line(value) -> str:
    text = " ".join(str(value).split())
    return text or type(value).__name__


def _bytes(n: int) -> str:
    return f"{n:,} bytes"


# ------------------------------------------------------------------- originals and checking
def _read_originals(source: Source, files: list[Path]) -> dict[str, bytes | dict[str, bytes]]:
    """The original files of ``source`` (folders: name -> bytes), checked against their sha256."""
    wanted = dict(source.members)
    found: dict[str, bytes | dict[str, bytes]] = {}
    where: dict[str, str] = {}
    for path in files:
        plain = [role for role, (spec, _) in wanted.items() if spec == path.name]
        for role in plain:  # a file downloaded as it is
            found[role] = _read_bytes(path)
            where[role] = path.name
        if not plain:
            _read_archive(path, wanted, found, where)
    for role, (spec, sha) in wanted.items():
        if role not in found or (spec.endswith("/") and not found[role]):
            raise DataFileError(f"{', '.join(f.name for f in files)}: no {spec} in the download; "
                                f"it was removed, run the command again")
        if sha is not None:
            got = hashlib.sha256(found[role]).hexdigest()
            if got != sha:
                raise DataFileError(f"checksum mismatch for {where[role]}: expected sha256 "
                                    f"{sha}, got {got}; the file was removed, run the command "
                                    f"again or pass --data-dir")
    return found


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise DataFileError(f"{path}: cannot read: {exc.strerror or _one_line(exc)}") from None


def _read_archive(path: Path, wanted, found, where) -> None:
    files = {role: spec for role, (spec, _) in wanted.items() if not spec.endswith("/")}
    folders = {role: spec.rstrip("/") for role, (spec, _) in wanted.items() if spec.endswith("/")}
    for role in folders:
        found.setdefault(role, {})
    try:
        with tarfile.open(path, "r|*") as archive:
            for member in archive:
                if not member.isfile():
                    continue
                text = member.name
                while text.startswith("./"):
                    text = text[2:]
                name = PurePosixPath(text)
                for role, spec in files.items():
                    if text == spec or text.endswith("/" + spec):
                        found[role] = archive.extractfile(member).read()
                        where[role] = f"{spec} in {path.name}"
                for role, spec in folders.items():
                    parent = str(name.parent)
                    if (parent == spec or parent.endswith("/" + spec)) \
                            and name.name.endswith(".txt"):
                        found[role][name.name] = archive.extractfile(member).read()
                        where[role] = f"{spec}/ in {path.name}"
    except (tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise DataFileError(f"{path.name}: not a valid archive ({_one_line(exc)}); it was "
                            f"removed, run the command again") from None


# ------------------------------------------------------------------------------- converting
def convert(name: str, originals: dict, *, source: Source | None = None) -> dict[str, bytes]:
    """Convert original files (role -> bytes, as in ``SOURCES[name].members``) to the project's
    ``label<TAB>text`` files: output name -> uncompressed UTF-8 content, checked against the
    sha256 values of ``source`` (default ``SOURCES[name]``)."""
    key = _check_name(name)
    source = SOURCES[key] if source is None else source
    outputs = _CONVERTERS[key](originals, source)
    for output, sha in source.outputs.items():
        got = hashlib.sha256(outputs[output]).hexdigest()
        if sha is not None and got != sha:
            raise DataFileError(f"converted {source.folder}/{output} has sha256 {got}, expected "
                                f"{sha}; the download was removed (please report this)")
    return outputs


def _clean(text: str) -> str:
    return _BREAKS.sub(" ", text)


def _rows(data: bytes, encoding: str, what: str) -> list[str]:
    lines = data.split(b"\n")
    if lines and not lines[-1]:
        lines.pop()
    try:
        return [_clean(line.decode(encoding)) for line in lines]
    except UnicodeDecodeError as exc:
        raise DataFileError(f"{what}: not {encoding} ({exc.reason}); it was removed, run the "
                            f"command again") from None


def _tsv(rows) -> bytes:
    return "".join(f"{label}\t{text}\n" for label, text in rows).encode("utf-8")


def _convert_two_files(originals, source: Source, labels: tuple[str, str]) -> dict[str, bytes]:
    rows = [(label, text) for label in labels
            for text in _rows(originals[label], "cp1252", source.members[label][0])]
    return {"all.tsv": _tsv(rows)}


def _convert_mr(originals, source):
    return _convert_two_files(originals, source, ("pos", "neg"))


def _convert_subj(originals, source):
    return _convert_two_files(originals, source, ("subj", "obj"))


def _convert_trec(originals, source):
    outputs = {}
    for split in ("train", "test"):
        coarse, fine = [], []
        what = source.members[split][0]
        for number, line in enumerate(_rows(originals[split], "latin-1", what), start=1):
            label, space, text = line.partition(" ")
            if not space or ":" not in label:
                raise DataFileError(f"{what}: line {number}: expected 'COARSE:fine question'; "
                                    f"it was removed, run the command again")
            coarse.append((label.split(":", 1)[0], text))
            fine.append((label, text))
        outputs[f"{split}.tsv"] = _tsv(coarse)
        outputs[f"{split}_fine.tsv"] = _tsv(fine)
    return {name: outputs[name] for name in ("train.tsv", "test.tsv", "train_fine.tsv",
                                             "test_fine.tsv")}


def _convert_imdb(originals, source):
    outputs = {}
    for split in ("train", "test"):
        rows = []
        for label, ratings in (("pos", range(7, 11)), ("neg", range(1, 5))):
            role = f"{split}/{label}"
            reviews = originals[role]
            _check_reviews(source.members[role][0], reviews, ratings, source.per_class)
            for file_name in sorted(reviews, key=lambda n: n.encode("utf-8")):  # C locale
                try:
                    text = reviews[file_name].decode("utf-8")
                except UnicodeDecodeError:
                    raise DataFileError(f"{role}/{file_name}: not valid UTF-8; the download "
                                        f"was removed, run the command again") from None
                rows.append((label, _clean(text)))
        outputs[f"{split}.tsv.gz"] = _tsv(rows)
    return outputs


def _check_reviews(folder: str, reviews: dict[str, bytes], ratings: range, per_class: int):
    """Ids 0..per_class-1, once each; ratings in ``ratings``; no empty review."""
    ids = []
    for file_name, data in reviews.items():
        match = _REVIEW.fullmatch(file_name)
        if not match or int(match[2]) not in ratings or not data:
            raise DataFileError(f"{folder}{file_name}: not an expected review file (ratings "
                                f"{ratings.start}-{ratings.stop - 1}, not empty); the download "
                                f"was removed, run the command again")
        ids.append(int(match[1]))
    if per_class and sorted(ids) != list(range(per_class)):
        raise DataFileError(f"{folder}: {len(ids)} reviews, expected ids 0..{per_class - 1}; "
                            f"the download was removed, run the command again")


_CONVERTERS: dict[str, Callable[[dict, Source], dict[str, bytes]]] = {
    "mr": _convert_mr, "subj": _convert_subj, "trec": _convert_trec, "imdb": _convert_imdb,
}


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
        raise DataFileError(f"cannot create {path}: {exc.strerror or _one_line(exc)}") from None


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass

