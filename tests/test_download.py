"""Dataset downloads (``cpgbn.datasets.download``, ``cpgbn download``) against a local HTTP server.

A threaded HTTP server on 127.0.0.1 serves small archives laid out exactly like the originals
(built here), with Range support and injectable faults: 404, a hang, a stall in the middle of a
file, a connection dropped in the middle of a file, a server that ignores Range.  The expected
sha256 values are patched for these small files; the real table is checked against the real
data (tests marked ``data``).  No test can reach the internet: name resolution of any host other
than the loopback fails.
"""
from __future__ import annotations

import argparse
import dataclasses
import errno
import gzip
import hashlib
import http.server
import io
import re
import socket
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest

import cpgbn.datasets
from cpgbn.cli.download import add_download_parser
from cpgbn.datasets import dataset_info, has_dataset, load_dataset, resolve_data_dir
from cpgbn.datasets import download as dl
from cpgbn.errors import CPGBNInputError, DataFileError

# ----------------------------------------------------------------------------- fixtures


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """A private user cache, no data/download variables, and no name resolution off loopback."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    for var in ("CPGBN_DATA", "CPGBN_DOWNLOAD", "CPGBN_DOWNLOAD_MIRROR"):
        monkeypatch.delenv(var, raising=False)
    real = socket.getaddrinfo

    def loopback_only(host, *args, **kwargs):
        if host not in ("127.0.0.1", "localhost", "::1"):
            raise socket.gaierror(socket.EAI_NONAME, f"tests may not resolve {host}")
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", loopback_only)


class _Handler(http.server.BaseHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass

    def do_GET(self):  # noqa: N802 (the http.server API)
        state = self.server.state
        name = self.path.lstrip("/")
        state["requests"].append((name, dict(self.headers)))
        fault = state["faults"].pop(name, None)
        if fault == "hang":
            state["release"].wait(10)
            return
        if name not in state["files"] or fault == "404":
            self.send_error(404, "Not Found")
            return
        data = state["files"][name]
        start = 0
        match = re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range", ""))
        if match and fault != "ignore-range":
            start = int(match[1])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(data) - start))
        self.send_header("Content-Type", "application/octet-stream")
        self.end_headers()
        body = data[start:]
        if isinstance(fault, tuple):  # ("drop" | "stall", n): send n bytes, then fail
            kind, n = fault
            self.wfile.write(body[:n])
            self.wfile.flush()
            if kind == "stall":
                state["release"].wait(10)
            self.close_connection = True
            return
        self.wfile.write(body)


class _Server:
    def __init__(self):
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.httpd.daemon_threads = True
        self.httpd.state = {"files": {}, "faults": {}, "requests": [],
                            "release": threading.Event()}
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    files = property(lambda self: self.httpd.state["files"])
    faults = property(lambda self: self.httpd.state["faults"])
    requests = property(lambda self: self.httpd.state["requests"])

    def close(self):
        self.httpd.state["release"].set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    srv = _Server()
    yield srv
    srv.close()


# ----------------------------------------------------------------------------- fake originals
def _tar_gz(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# MR / SUBJ: cp1252 bytes (0x85 "…", 0x96 "–", 0x97 "—", 0x91 "‘"), trailing spaces kept.
MR_POS = b"the rock is destined to be \x85 great . \nit's a \x96 charming \x97 film . \n"
MR_NEG = b"simplistic , silly and tedious . \n\x91bad\x92 , really bad .\n"
MR_TSV = ("pos\tthe rock is destined to be \u2026 great . \n"
          "pos\tit's a \u2013 charming \u2014 film . \n"
          "neg\tsimplistic , silly and tedious . \n"
          "neg\t\u2018bad\u2019 , really bad .\n").encode("utf-8")
SUBJ_QUOTE = b"smart and alert , thirteen conversations \x85 \n"
SUBJ_PLOT = b"the movie begins in the past .\nthen \x97 the present . \n"
SUBJ_TSV = ("subj\tsmart and alert , thirteen conversations \u2026 \n"
            "obj\tthe movie begins in the past .\n"
            "obj\tthen \u2014 the present . \n").encode("utf-8")
# TREC: latin-1, "COARSE:fine text"; 0xF0 as in the real train file ("sister\xf0city").
TREC_TRAIN = (b"DESC:manner How did serfdom develop in and then leave Russia ?\n"
              b"LOC:city What is the sister\xf0city of Detroit ?\n"
              b"NUM:date When was Ozzy Osbourne born ?\n")
TREC_TEST = b"NUM:dist How far is it from Denver to Aspen ?\nHUM:desc Who was Galileo ?\n"
TREC_OUT = {
    "train.tsv": "DESC\tHow did serfdom develop in and then leave Russia ?\n"
                 "LOC\tWhat is the sister\u00f0city of Detroit ?\n"
                 "NUM\tWhen was Ozzy Osbourne born ?\n",
    "test.tsv": "NUM\tHow far is it from Denver to Aspen ?\nHUM\tWho was Galileo ?\n",
    "train_fine.tsv": "DESC:manner\tHow did serfdom develop in and then leave Russia ?\n"
                      "LOC:city\tWhat is the sister\u00f0city of Detroit ?\n"
                      "NUM:date\tWhen was Ozzy Osbourne born ?\n",
    "test_fine.tsv": "NUM:dist\tHow far is it from Denver to Aspen ?\n"
                     "HUM:desc\tWho was Galileo ?\n",
}
IMDB_N = 11  # reviews per split and class: ids 0..10, so C-locale order is 0, 10, 1, 2, ...


def _imdb_review(split: str, label: str, i: int) -> str:
    text = f"{split} {label} review {i}.<br /><br />Fine."
    if i == 3:  # tabs and NEL runs inside a review become one space each
        text = f"{split} {label} review 3:\ttab\t\tand\u0085\u0085nel\u0085 end."
    return text


def _imdb_members() -> dict[str, bytes]:
    members = {"aclImdb/README": b"Large Movie Review Dataset v1.0\n",
               "aclImdb/imdb.vocab": b"the\nand\n",
               "aclImdb/train/labeledBow.feat": b"9 0:9 1:1\n",
               "aclImdb/train/urls_pos.txt": b"http://www.imdb.com/title/tt0453418/usercomments\n",
               "aclImdb/train/unsup/0_0.txt": b"an unlabeled review",
               "aclImdb/train/unsup/1_0.txt": b"another one"}
    for split in ("train", "test"):
        for label, rating in (("pos", 7), ("neg", 4)):
            for i in reversed(range(IMDB_N)):  # archive order must not matter
                rate = rating + (i % 4) * (1 if label == "pos" else -1)
                members[f"aclImdb/{split}/{label}/{i}_{rate}.txt"] = \
                    _imdb_review(split, label, i).encode("utf-8")
    return members


def _imdb_expected(split: str) -> bytes:
    order = sorted(range(IMDB_N), key=lambda i: f"{i}_")  # C locale: 0_, 10_, 1_, 2_, ...
    assert order[:3] == [0, 10, 1]
    rows = []
    for label in ("pos", "neg"):
        for i in order:
            text = _imdb_review(split, label, i)
            text = text.replace("\t\t", " ").replace("\t", " ")
            text = text.replace("\u0085\u0085", " ").replace("\u0085", " ")
            rows.append(f"{label}\t{text}\n")
    return "".join(rows).encode("utf-8")


FAKE_FILES = {
    "mr": {"rt-polaritydata.tar.gz": _tar_gz({
        "rt-polaritydata.README.1.0.txt": b"sentence polarity dataset v1.0\n",
        "rt-polaritydata/rt-polarity.neg": MR_NEG,
        "rt-polaritydata/rt-polarity.pos": MR_POS})},
    "subj": {"rotten_imdb.tar.gz": _tar_gz({
        "subjdata.README.1.0": b"subjectivity dataset v1.0\n",
        "quote.tok.gt9.5000": SUBJ_QUOTE,
        "plot.tok.gt9.5000": SUBJ_PLOT})},
    "trec": {"train_5500.label": TREC_TRAIN, "TREC_10.label": TREC_TEST},
    "imdb": {"aclImdb_v1.tar.gz": _tar_gz(_imdb_members())},
}
FAKE_SHAS = {
    "mr": {"pos": _sha(MR_POS), "neg": _sha(MR_NEG)},
    "subj": {"subj": _sha(SUBJ_QUOTE), "obj": _sha(SUBJ_PLOT)},
    "trec": {"train": _sha(TREC_TRAIN), "test": _sha(TREC_TEST)},
    "imdb": {},
}
EXPECTED = {
    "mr": {"all.tsv": MR_TSV},
    "subj": {"all.tsv": SUBJ_TSV},
    "trec": {name: text.encode("utf-8") for name, text in TREC_OUT.items()},
    "imdb": {"train.tsv.gz": _imdb_expected("train"), "test.tsv.gz": _imdb_expected("test")},
}


def _fake_source(name: str, **outputs) -> dl.Source:
    real = dl.SOURCES[name]
    members = {role: (spec, FAKE_SHAS[name].get(role)) for role, (spec, _) in real.members.items()}
    out = {file: outputs.get(file) for file in real.outputs}
    return dataclasses.replace(real, members=members, outputs=out,
                               per_class=IMDB_N if real.per_class else 0)


@pytest.fixture
def fake(server, monkeypatch):
    """The server holds every fake original, and SOURCES expects their checksums."""
    for name, files in FAKE_FILES.items():
        server.files.update(files)
        monkeypatch.setitem(dl.SOURCES, name, _fake_source(name))
    return server


def _fetch(name, root, server, **kwargs):
    kwargs = {"mirror": server.url, "progress": False, "timeout": 5, **kwargs}
    return dl.fetch(name, root, **kwargs)


def _files(root: Path) -> list[str]:
    """The files (not folders) below ``root``, hidden ones included, relative and sorted."""
    return sorted(str(p.relative_to(root)) for p in Path(root).rglob("*") if p.is_file())


def _content(path: Path) -> bytes:
    return gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()


def _assert_outputs(root: Path, name: str):
    folder = root / dl.SOURCES[name].folder
    assert sorted(p.name for p in folder.iterdir()) == sorted(EXPECTED[name])
    for file, expected in EXPECTED[name].items():
        assert _content(folder / file) == expected, file


# ----------------------------------------------------------------------------- success
def test_sources_match_the_loaders():
    for name, source in dl.SOURCES.items():
        assert sorted(f"{source.folder}/{f}" for f in source.outputs) == \
            sorted(dataset_info(name)["files"])
        for url in source.urls:
            assert url.startswith("https://")
    assert cpgbn.datasets.fetch is dl.fetch
    assert cpgbn.datasets.load_dataset is load_dataset


@pytest.mark.parametrize("name", ["mr", "subj", "trec", "imdb"])
def test_fetch_downloads_verifies_and_converts(fake, tmp_path, name):
    root = tmp_path / "data"
    assert _fetch(name, root, fake) == root
    _assert_outputs(root, name)
    assert _files(root) == sorted(
        f"{dl.SOURCES[name].folder}/{f}" for f in EXPECTED[name])  # no archive, no .part
    assert has_dataset(root, name)
    texts, labels = load_dataset(name, "all", data_dir=root)
    coarse = [f for f in EXPECTED[name] if "fine" not in f]
    assert len(texts) == sum(EXPECTED[name][f].count(b"\n") for f in coarse)
    if name == "imdb":
        assert labels == (["pos"] * IMDB_N + ["neg"] * IMDB_N) * 2
        with gzip.open(root / "IMDB" / "train.tsv.gz", "rb") as handle:  # a plain gzip file
            assert handle.read() == EXPECTED["imdb"]["train.tsv.gz"]
    # present now: a second fetch asks the server nothing
    before = len(fake.requests)
    assert _fetch(name, root, fake) == root
    assert len(fake.requests) == before


def test_fetch_sends_no_range_for_a_fresh_download(fake, tmp_path):
    _fetch("trec", tmp_path, fake)
    assert [r[0] for r in fake.requests] == ["train_5500.label", "TREC_10.label"]
    assert all("Range" not in headers for _, headers in fake.requests)
    assert all(headers["User-Agent"].startswith("cpgbn/") for _, headers in fake.requests)


def test_mirror_from_the_environment(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("CPGBN_DOWNLOAD_MIRROR", fake.url + "/")
    dl.fetch("subj", tmp_path, progress=False)
    _assert_outputs(tmp_path, "subj")


def test_progress_bar_and_messages_on_stderr(fake, tmp_path, capsys):
    _fetch("trec", tmp_path, fake, progress=True)
    err = capsys.readouterr().err
    assert "train_5500.label" in err and "TREC_10.label" in err
    assert "cpgbn: trec: wrote" in err


# ----------------------------------------------------------------------------- resuming
def _big_trec(server, monkeypatch, lines=400):
    train = b"".join(b"NUM:count How many questions are there in test number %d ?\n" % i
                     for i in range(lines))
    server.files["train_5500.label"] = train
    monkeypatch.setitem(dl.SOURCES, "trec", dataclasses.replace(
        dl.SOURCES["trec"], members={"train": ("train_5500.label", _sha(train)),
                                     "test": ("TREC_10.label", _sha(TREC_TEST))}))
    return train


def test_interrupted_download_resumes_with_range(fake, tmp_path, monkeypatch):
    train = _big_trec(fake, monkeypatch)
    fake.faults["train_5500.label"] = ("drop", 5000)
    with pytest.raises(DataFileError, match=r"closed after 5,000 bytes of "
                                            rf"{len(train):,} bytes; run the command again"):
        _fetch("trec", tmp_path, fake)
    part = tmp_path / ".downloads" / "train_5500.label.part"
    assert part.read_bytes() == train[:5000]
    assert not (tmp_path / "TREC").exists()

    _fetch("trec", tmp_path, fake)
    train_requests = [h for name, h in fake.requests if name == "train_5500.label"]
    assert len(train_requests) == 2 and train_requests[1]["Range"] == "bytes=5000-"
    assert (tmp_path / "TREC" / "train_fine.tsv").read_text("utf-8").count("\n") == 400
    assert _files(tmp_path) == [f"TREC/{f}" for f in sorted(EXPECTED["trec"])]


def test_stalled_download_times_out_and_resumes(fake, tmp_path, monkeypatch):
    train = _big_trec(fake, monkeypatch)
    fake.faults["train_5500.label"] = ("stall", 3000)
    start = time.monotonic()
    with pytest.raises(DataFileError, match=r"timed out after 3,000 bytes; run the command "
                                            r"again to resume"):
        _fetch("trec", tmp_path, fake, timeout=0.3)
    assert time.monotonic() - start < 5
    assert (tmp_path / ".downloads" / "train_5500.label.part").read_bytes() == train[:3000]
    _fetch("trec", tmp_path, fake)
    assert [h.get("Range") for n, h in fake.requests if n == "train_5500.label"] == \
        [None, "bytes=3000-"]
    assert (tmp_path / "TREC" / "train.tsv").read_text("utf-8").count("\n") == 400


def test_resume_restarts_when_the_server_ignores_range(fake, tmp_path):
    downloads = tmp_path / ".downloads"
    downloads.mkdir()
    (downloads / "train_5500.label.part").write_bytes(b"stale bytes of another file")
    fake.faults["train_5500.label"] = "ignore-range"
    _fetch("trec", tmp_path, fake)
    _assert_outputs(tmp_path, "trec")
    assert fake.requests[0][1]["Range"] == f"bytes={len(b'stale bytes of another file')}-"


def test_complete_part_file_is_finished_after_416(fake, tmp_path):
    downloads = tmp_path / ".downloads"
    downloads.mkdir()
    (downloads / "train_5500.label.part").write_bytes(TREC_TRAIN)  # all bytes, not renamed
    _fetch("trec", tmp_path, fake)
    _assert_outputs(tmp_path, "trec")


def test_part_file_that_is_too_long_is_downloaded_again(fake, tmp_path):
    downloads = tmp_path / ".downloads"
    downloads.mkdir()
    (downloads / "train_5500.label.part").write_bytes(TREC_TRAIN + b"junk at the end\n")
    _fetch("trec", tmp_path, fake)
    _assert_outputs(tmp_path, "trec")


# ----------------------------------------------------------------------------- failures
def test_checksum_mismatch_removes_the_file(fake, tmp_path, monkeypatch):
    wrong = "0" * 64
    source = dl.SOURCES["mr"]
    monkeypatch.setitem(dl.SOURCES, "mr", dataclasses.replace(
        source, members={**source.members, "neg": ("rt-polaritydata/rt-polarity.neg", wrong)}))
    with pytest.raises(DataFileError) as info:
        _fetch("mr", tmp_path, fake)
    message = str(info.value)
    assert "\n" not in message
    assert "checksum mismatch for rt-polaritydata/rt-polarity.neg in rt-polaritydata.tar.gz" \
        in message
    assert f"expected sha256 {wrong}, got {_sha(MR_NEG)}" in message
    assert "removed" in message
    assert _files(tmp_path) == []  # no archive, no .part, no MR folder


def test_checksum_mismatch_of_a_plain_file(fake, tmp_path):
    fake.files["TREC_10.label"] = TREC_TEST.replace(b"Galileo", b"Galilei")
    with pytest.raises(DataFileError, match=r"checksum mismatch for TREC_10.label: expected "
                                            rf"sha256 {_sha(TREC_TEST)}, got"):
        _fetch("trec", tmp_path, fake)
    assert _files(tmp_path) == []


def test_corrupt_archive(fake, tmp_path):
    fake.files["rotten_imdb.tar.gz"] = b"<html>not an archive</html>"
    with pytest.raises(DataFileError, match=r"rotten_imdb.tar.gz: not a valid archive"):
        _fetch("subj", tmp_path, fake)
    assert _files(tmp_path) == []


def test_archive_without_the_expected_member(fake, tmp_path):
    fake.files["rt-polaritydata.tar.gz"] = _tar_gz({"rt-polaritydata/rt-polarity.pos": MR_POS})
    with pytest.raises(DataFileError, match=r"no rt-polaritydata/rt-polarity.neg in the "
                                            r"download"):
        _fetch("mr", tmp_path, fake)
    assert _files(tmp_path) == []


def test_imdb_structure_is_checked(fake, tmp_path):
    members = _imdb_members()
    del members["aclImdb/test/neg/5_3.txt"]
    fake.files["aclImdb_v1.tar.gz"] = _tar_gz(members)
    with pytest.raises(DataFileError, match=r"aclImdb/test/neg/: 10 reviews, expected ids "
                                            r"0..10"):
        _fetch("imdb", tmp_path, fake)
    assert _files(tmp_path) == []


def test_converted_output_is_checked(fake, tmp_path, monkeypatch):
    monkeypatch.setitem(dl.SOURCES, "trec", _fake_source("trec", **{"test.tsv": "f" * 64}))
    with pytest.raises(DataFileError, match=r"converted TREC/test.tsv has sha256 [0-9a-f]{64}, "
                                            r"expected f{64}"):
        _fetch("trec", tmp_path, fake)
    assert _files(tmp_path) == []


def test_http_404(fake, tmp_path):
    fake.faults["TREC_10.label"] = "404"
    with pytest.raises(DataFileError, match=rf"could not download {fake.url}/TREC_10.label: "
                                            r"HTTP 404 Not Found"):
        _fetch("trec", tmp_path, fake)
    # the first file arrived completely; it is kept for the next attempt, nothing else is
    assert _files(tmp_path) == [".downloads/train_5500.label"]
    _fetch("trec", tmp_path, fake)
    assert [n for n, _ in fake.requests] == ["train_5500.label", "TREC_10.label",
                                            "TREC_10.label"]
    _assert_outputs(tmp_path, "trec")


def test_timeout_before_any_response(fake, tmp_path):
    fake.faults["train_5500.label"] = "hang"
    start = time.monotonic()
    with pytest.raises(DataFileError, match=r"could not download .*train_5500.label: timed out; "
                                            r"check your connection or pass --data-dir"):
        _fetch("trec", tmp_path, fake, timeout=0.3)
    assert time.monotonic() - start < 5
    assert _files(tmp_path) == []


def test_offline(tmp_path):
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(DataFileError, match=r"could not download http://127.0.0.1:\d+/"
                                            r"rt-polaritydata.tar.gz: .*refused; check your "
                                            r"connection or pass --data-dir"):
        dl.fetch("mr", tmp_path, mirror=f"http://127.0.0.1:{port}", progress=False)
    with pytest.raises(DataFileError, match=r"could not download https://www.cs.cornell.edu/"
                                            r".*cannot resolve the host name"):
        dl.fetch("mr", tmp_path, progress=False)  # the real URL: resolution fails here
    assert _files(tmp_path) == []


def test_disk_full_while_downloading(fake, tmp_path, monkeypatch):
    def no_space(handle, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(dl, "_write", no_space)
    with pytest.raises(DataFileError, match=r"disk full while writing .*train_5500.label.part; "
                                            r"free some space"):
        _fetch("trec", tmp_path, fake)
    assert _files(tmp_path) == []


def test_disk_full_while_writing_the_converted_files(fake, tmp_path, monkeypatch):
    real_write = dl._write

    def full_in_trec_folder(handle, data):
        if "TREC" in str(handle.name) and "test_fine" in str(handle.name):
            raise OSError(errno.ENOSPC, "No space left on device")
        real_write(handle, data)

    monkeypatch.setattr(dl, "_write", full_in_trec_folder)
    with pytest.raises(DataFileError, match=r"disk full while writing .*TREC/test_fine.tsv"):
        _fetch("trec", tmp_path, fake)
    assert [f for f in _files(tmp_path) if f.startswith("TREC")] == []  # none half-written
    monkeypatch.setattr(dl, "_write", real_write)
    _fetch("trec", tmp_path, fake)  # the downloads were kept: no new request
    assert len(fake.requests) == 2
    _assert_outputs(tmp_path, "trec")


def test_bad_arguments(tmp_path):
    with pytest.raises(DataFileError, match="unknown dataset 'reuters'"):
        dl.fetch("reuters", tmp_path)
    with pytest.raises(DataFileError, match="cpgbn cannot download elec: put elec-25k-train"):
        dl.fetch("elec", tmp_path)
    with pytest.raises(CPGBNInputError, match="timeout must be a positive number"):
        dl.fetch("trec", tmp_path, timeout=0)


# ----------------------------------------------------------------------------- resolution
def _write_fake_trec(root: Path) -> Path:
    (root / "TREC").mkdir(parents=True)
    for file, text in TREC_OUT.items():
        (root / "TREC" / file).write_text(text, encoding="utf-8")
    return root


def test_resolution_order(fake, tmp_path, monkeypatch):
    given = _write_fake_trec(tmp_path / "given")
    env = _write_fake_trec(tmp_path / "env")
    cache = tmp_path / "xdg-cache" / "cpgbn"
    monkeypatch.setenv("CPGBN_DATA", str(env))
    assert resolve_data_dir(given, name="trec") == given
    assert resolve_data_dir(name="trec") == env
    monkeypatch.delenv("CPGBN_DATA")
    with pytest.raises(DataFileError, match=r"no data directory with trec: pass --data-dir or "
                                            r"set CPGBN_DATA .*run `cpgbn download trec`"):
        resolve_data_dir(name="trec")
    assert not cache.exists()
    _write_fake_trec(cache)
    assert resolve_data_dir(name="TREC") == cache
    assert fake.requests == []


def test_cache_dir_location(tmp_path, monkeypatch):
    assert cpgbn.datasets.cache_dir() == tmp_path / "xdg-cache" / "cpgbn"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cpgbn.datasets.cache_dir() == tmp_path / "home" / ".cache" / "cpgbn"


def test_automatic_download_into_the_cache(fake, tmp_path, monkeypatch):
    monkeypatch.setenv("CPGBN_DOWNLOAD", "1")
    monkeypatch.setenv("CPGBN_DOWNLOAD_MIRROR", fake.url)
    texts, labels = load_dataset("trec", "test")
    assert labels == ["NUM", "HUM"] and texts[1] == "Who was Galileo ?"
    cache = tmp_path / "xdg-cache" / "cpgbn"
    _assert_outputs(cache, "trec")
    assert load_dataset("trec", "train", fine=True)[1][1] == "LOC:city"
    assert len(fake.requests) == 2  # downloaded once


def test_download_into_a_given_folder_that_lacks_the_dataset(fake, tmp_path, monkeypatch):
    with pytest.raises(DataFileError, match=r"TREC/train.tsv: no such file; run `cpgbn download "
                                            r"trec --data-dir "):
        load_dataset("trec", data_dir=tmp_path)
    monkeypatch.setenv("CPGBN_DOWNLOAD_MIRROR", fake.url)
    assert resolve_data_dir(tmp_path, name="trec", download=True) == tmp_path
    _assert_outputs(tmp_path, "trec")


def test_download_setting_is_checked(monkeypatch, tmp_path):
    monkeypatch.setenv("CPGBN_DOWNLOAD", "maybe")
    with pytest.raises(CPGBNInputError, match="CPGBN_DOWNLOAD must be 1, 0 or ask, got 'maybe'"):
        resolve_data_dir(name="trec")
    monkeypatch.setenv("CPGBN_DOWNLOAD", "ask")  # no terminal under pytest: no question
    with pytest.raises(DataFileError, match="cpgbn download trec"):
        resolve_data_dir(name="trec")


class _Terminal(io.StringIO):
    def isatty(self):
        return True


@pytest.mark.parametrize("answer", ["\n", "y\n", "n\n", ""])
def test_download_offer_on_a_terminal(fake, tmp_path, monkeypatch, answer):
    monkeypatch.setenv("CPGBN_DOWNLOAD_MIRROR", fake.url)
    monkeypatch.setattr("sys.stdin", _Terminal(answer))
    monkeypatch.setattr("sys.stderr", _Terminal())
    cache = tmp_path / "xdg-cache" / "cpgbn"
    if answer in ("\n", "y\n"):  # Enter or yes: download
        assert resolve_data_dir(name="trec", download="ask") == cache
        _assert_outputs(cache, "trec")
    else:  # no, or end of input: the usual error
        with pytest.raises(DataFileError, match="cpgbn download trec"):
            resolve_data_dir(name="trec", download="ask")
        assert fake.requests == []
    assert f"cpgbn: trec is not in {cache}. Download it (0.4 MB) from https://cogcomp" \
        in sys.stderr.getvalue()


def test_nothing_is_downloaded_when_cpgbn_data_has_the_dataset(fake, tmp_path, monkeypatch):
    data = _write_fake_trec(tmp_path / "data")
    monkeypatch.setenv("CPGBN_DATA", str(data))
    monkeypatch.setenv("CPGBN_DOWNLOAD", "1")
    monkeypatch.setenv("CPGBN_DOWNLOAD_MIRROR", fake.url)
    assert dl.fetch("trec", progress=False) == data
    assert load_dataset("trec", "test")[1] == ["NUM", "HUM"]
    assert fake.requests == []
    assert not (tmp_path / "xdg-cache").exists()


# ----------------------------------------------------------------------------- command line
def _run(argv, capsys):
    parser = argparse.ArgumentParser(prog="cpgbn")
    add_download_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except CPGBNInputError as exc:  # what cpgbn.cli.main does with it
        code, message = 2, f"cpgbn: error: {exc}"
        print(message)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_download(fake, tmp_path, capsys):
    root = tmp_path / "data"
    code, out, err = _run(["download", "TREC", "--data-dir", str(root), "--mirror", fake.url],
                          capsys)
    assert code == 0
    assert out == f"trec: downloaded and verified TREC/train.tsv, TREC/test.tsv, " \
                  f"TREC/train_fine.tsv, TREC/test_fine.tsv in {root}\n"
    assert "train_5500.label" in err  # the progress bar
    _assert_outputs(root, "trec")
    code, out, err = _run(["download", "trec", "--data-dir", str(root), "--quiet"], capsys)
    assert code == 0 and out == f"trec: already in {root / 'TREC'}; nothing downloaded\n"
    assert err == "" and len(fake.requests) == 2


def test_cli_download_to_the_cache_and_errors(fake, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("CPGBN_DOWNLOAD_MIRROR", fake.url)
    code, out, _ = _run(["download", "subj", "--quiet"], capsys)
    assert code == 0 and str(tmp_path / "xdg-cache" / "cpgbn") in out
    fake.faults["rt-polaritydata.tar.gz"] = "404"
    code, out, _ = _run(["download", "mr", "--quiet", "--timeout", "2"], capsys)
    assert code == 2 and out.startswith("cpgbn: error: could not download ") and "404" in out
    with pytest.raises(SystemExit) as exc:
        _run(["download", "mr", "--timeout", "0"], capsys)
    assert exc.value.code == 2
    code, out, _ = _run(["download", "elec"], capsys)   # not downloadable: where to put it
    assert code == 2 and out.startswith("cpgbn: error: cpgbn cannot download elec: put ")
    assert "elec-25k-train.txt.tok" in out and "\n" not in out.strip()


# ----------------------------------------------------------------------------- the real files
def _rows(path: Path) -> list[tuple[str, str]]:
    lines = _content(path).decode("utf-8").split("\n")[:-1]
    return [tuple(line.split("\t", 1)) for line in lines]


def _originals(data_dir: Path) -> dict[str, dict[str, bytes]]:
    """The original files, rebuilt from the converted ones by inverting the conversion."""
    def encode(rows, label, encoding):
        return b"".join(text.encode(encoding) + b"\n" for lab, text in rows if lab == label)

    mr, subj = _rows(data_dir / "MR/all.tsv"), _rows(data_dir / "SUBJ/all.tsv")
    trec = {split: b"".join(f"{label} {text}\n".encode("latin-1")
                            for label, text in _rows(data_dir / f"TREC/{split}_fine.tsv"))
            for split in ("train", "test")}
    return {"mr": {"pos": encode(mr, "pos", "cp1252"), "neg": encode(mr, "neg", "cp1252")},
            "subj": {"subj": encode(subj, "subj", "cp1252"),
                     "obj": encode(subj, "obj", "cp1252")},
            "trec": trec}


@pytest.mark.data
def test_real_checksums_are_those_of_the_data_readme(data_dir):
    readme = (data_dir / "README.md").read_text("utf-8")
    for name, source in dl.SOURCES.items():
        for role, (_, sha) in source.members.items():
            assert sha is None or sha in readme, (name, role)
        for file, sha in source.outputs.items():
            if not file.endswith(".gz"):
                assert f"{sha}  {source.folder}/{file}" in readme
            assert _sha(_content(data_dir / source.folder / file)) == sha, file


@pytest.mark.data
def test_converters_reproduce_the_data_files(data_dir):
    """The originals rebuilt from the data files have the README's sha256, and converting them
    with the real table (which checks every checksum) gives the data files byte for byte."""
    for name, originals in _originals(data_dir).items():
        source = dl.SOURCES[name]
        for role, data in originals.items():
            assert _sha(data) == source.members[role][1], (name, role)
        outputs = dl.convert(name, originals)
        for file, content in outputs.items():
            assert content == (data_dir / source.folder / file).read_bytes(), file


@pytest.mark.data
def test_fetch_end_to_end_is_byte_identical(data_dir, server, tmp_path):
    """Archives laid out like the originals, served locally, fetched with the real checksums."""
    originals = _originals(data_dir)
    server.files["rt-polaritydata.tar.gz"] = _tar_gz({
        "rt-polaritydata/rt-polarity.neg": originals["mr"]["neg"],
        "rt-polaritydata/rt-polarity.pos": originals["mr"]["pos"]})
    server.files["rotten_imdb.tar.gz"] = _tar_gz({
        "quote.tok.gt9.5000": originals["subj"]["subj"],
        "plot.tok.gt9.5000": originals["subj"]["obj"]})
    server.files["train_5500.label"] = originals["trec"]["train"]
    server.files["TREC_10.label"] = originals["trec"]["test"]
    root = tmp_path / "data"
    for name in ("mr", "subj", "trec"):
        _fetch(name, root, server)
        for file in dl.SOURCES[name].outputs:
            path = f"{dl.SOURCES[name].folder}/{file}"
            assert (root / path).read_bytes() == (data_dir / path).read_bytes(), path


@pytest.mark.data
def test_imdb_converter_reproduces_the_data_files(data_dir):
    """Review files named so that C-locale order is the rows' order give the IMDB content."""
    originals = {}
    for split in ("train", "test"):
        rows = _rows(data_dir / f"IMDB/{split}.tsv.gz")
        for label, rating in (("pos", 8), ("neg", 2)):
            texts = [text for lab, text in rows if lab == label]
            ids = sorted(range(len(texts)), key=lambda i: f"{i}_")  # C-locale name order
            originals[f"{split}/{label}"] = {f"{i}_{rating}.txt": text.encode("utf-8")
                                             for i, text in zip(ids, texts)}
    outputs = dl.convert("imdb", originals)  # checks the recorded sha256 of the content
    assert sorted(outputs) == ["test.tsv.gz", "train.tsv.gz"]


@pytest.mark.data
def test_nothing_downloaded_with_the_shared_data(data_dir, monkeypatch, capsys):
    def no_network(*args, **kwargs):
        raise AssertionError("tried to download")

    monkeypatch.setattr(dl.urllib.request, "urlopen", no_network)
    monkeypatch.setenv("CPGBN_DATA", str(data_dir))
    monkeypatch.setenv("CPGBN_DOWNLOAD", "1")
    for name in dl.SOURCES:
        assert dl.fetch(name) == data_dir
        assert resolve_data_dir(name=name) == data_dir
        code, out, _ = _run(["download", name], capsys)
        assert code == 0 and "nothing downloaded" in out
