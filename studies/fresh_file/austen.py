"""A labelled file this project never saw, for `cpgbn evaluate FILE --cv 5 --supervised`
(issue 47): paragraphs of Jane Austen's six novels, labelled by novel.

The text comes from Debian's package r-cran-janeaustenr (the novels as Project Gutenberg
released them, one line of print per element), whose data is an R lazy-load database.  This
script turns it into `label<TAB>text` lines: the lines of each novel joined into paragraphs
(blank lines between them), paragraphs of fewer than 5 words and chapter or volume headings
dropped, 600 paragraphs per novel drawn with seed 0, the 3,600 lines shuffled with seed 1.
The file is data, not kept in the repository; its sha256 goes into the record.

    apt-get download r-cran-janeaustenr && dpkg-deb -x r-cran-janeaustenr_*.deb deb
    pip install rdata        # reads R's serialised objects (only for this script)
    python -m studies.fresh_file.austen deb/usr/lib/R/site-library/janeaustenr/data austen.tsv
    cpgbn evaluate austen.tsv --cv 5 --supervised --json results/fresh_file/austen_cv5.json
"""
import argparse
import gzip
import hashlib
import re
import zlib
from pathlib import Path

import numpy as np

PER_NOVEL = 600
MIN_WORDS = 5


def read_novels(data_dir: Path) -> dict:
    """{novel: [line, ...]} from the package's lazy-load database (Rdata.rdx, a gzipped index
    of (offset, length) per object, and Rdata.rdb, each object zlib-compressed after a 4-byte
    length)."""
    import rdata
    index = rdata.conversion.convert(rdata.parser.parse_data(
        gzip.decompress((data_dir / "Rdata.rdx").read_bytes())))
    database = (data_dir / "Rdata.rdb").read_bytes()
    novels = {}
    for name, (offset, length) in index["variables"].items():
        chunk = database[int(offset):int(offset) + int(length)]
        novels[str(name)] = [str(line) for line in rdata.conversion.convert(
            rdata.parser.parse_data(zlib.decompress(chunk[4:])))]
    return novels


def paragraphs(lines) -> list[str]:
    out, current = [], []
    for line in list(lines) + [""]:
        if line.strip():
            current.append(line.strip())
        elif current:
            out.append(" ".join(current))
            current = []
    return [p for p in out if len(p.split()) >= MIN_WORDS
            and not re.match(r"^(CHAPTER|Chapter|VOLUME)\b", p)]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data_dir", type=Path, help="the package's data folder (Rdata.rdx, Rdata.rdb)")
    p.add_argument("out", type=Path)
    args = p.parse_args(argv)
    rows = []
    for name, lines in sorted(read_novels(args.data_dir).items()):
        paras = paragraphs(lines)
        pick = np.random.default_rng(0).permutation(len(paras))[:PER_NOVEL]
        rows += [(name, paras[i]) for i in sorted(pick)]
    order = np.random.default_rng(1).permutation(len(rows))
    text = "".join(f"{rows[i][0]}\t{rows[i][1]}\n" for i in order)
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {len(rows)} lines to {args.out}, sha256 "
          f"{hashlib.sha256(text.encode('utf-8')).hexdigest()}")


if __name__ == "__main__":
    main()
