"""The datasets' original files and their conversion to the project's ``label<TAB>text`` files.

:data:`SOURCES` records, for each dataset, where its original files are published, the sha256 of
each original file (those of the data folder's README) and of each converted file.
:func:`read_originals` takes the original files out of the downloaded files and archives and
checks them; :func:`convert` turns them into the converted files exactly as the data folder's
README describes (decoding, label order, file order, collapsing runs of tab/line-break
characters to one space) and checks the result.  :mod:`cpgbn.datasets.download` does the network
and file-system work around them.
"""
from __future__ import annotations

import hashlib
import re
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from cpgbn.datasets.registry import check_name
from cpgbn.errors import DataFileError, one_line

__all__ = ["SOURCES", "Source", "convert", "read_originals"]


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


# ------------------------------------------------------------------- originals and checking
def read_originals(source: Source, files: list[Path]) -> dict[str, bytes | dict[str, bytes]]:
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
        raise DataFileError(f"{path}: cannot read: {exc.strerror or one_line(exc)}") from None


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
        raise DataFileError(f"{path.name}: not a valid archive ({one_line(exc)}); it was "
                            f"removed, run the command again") from None


# ------------------------------------------------------------------------------- converting
def convert(name: str, originals: dict, *, source: Source | None = None) -> dict[str, bytes]:
    """Convert original files (role -> bytes, as in ``SOURCES[name].members``) to the project's
    ``label<TAB>text`` files: output name -> uncompressed UTF-8 content, checked against the
    sha256 values of ``source`` (default ``SOURCES[name]``)."""
    key = check_name(name)
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
