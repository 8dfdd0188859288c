"""Render the HTML report of a saved model and take a screenshot with headless Chromium.

    python -m studies.cli_examples.report_screenshot MODEL_DIR OUT.png [DATA] [--data-dir DIR] [--keep-html R.html]

Writes the report (``cpgbn report``'s ``build_report``) to a temporary file, or uses
``--html`` when a report already exists, then runs ``chromium --headless --screenshot``.
Chromium's console output is checked: any console message (a script error, a blocked
resource) fails the run.  When no ``chromium`` is on the PATH, the script installs the Debian
package ``chromium`` with apt-get (only when run as root, and not with ``--no-install``).
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--enable-logging=stderr", "--v=0"]


def find_chromium(install: bool) -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    if install and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        print("chromium not found: installing the Debian package 'chromium' ...", file=sys.stderr)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update"], check=False, env=env)
        subprocess.run(["apt-get", "install", "-y", "chromium"], check=True, env=env)
        path = shutil.which("chromium")
        if path:
            return path
    sys.exit("chromium is not installed (Debian/Ubuntu: apt-get install chromium)")


def console_messages(stderr: str) -> list[str]:
    """Chromium's --enable-logging=stderr lines that carry a page console message."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model_dir", metavar="MODEL_DIR")
    parser.add_argument("out", metavar="OUT.png")
    parser.add_argument("data", metavar="DATA", nargs="?", default=None,
                        help="training documents (file or dataset name), as for cpgbn report")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--split", default="train")
    parser.add_argument("--html", default=None, help="screenshot this existing report instead")
    parser.add_argument("--keep-html", default=None, help="also save the generated report here")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=2400)
    parser.add_argument("--no-install", action="store_true", help="never apt-get install chromium")
    args = parser.parse_args(argv)

    chromium = find_chromium(install=not args.no_install)
    with tempfile.TemporaryDirectory(prefix="cpgbn-shot-") as tmp:
        if args.html:
            html_path = Path(args.html).resolve()
        else:
            from cpgbn.cli.common import read_documents
            from cpgbn.explain.report import build_report, write_report
            from cpgbn.model import CPGBN
            model = CPGBN.load(args.model_dir)
            texts = labels = None
            if args.data:
                texts, labels = read_documents(args.data, args.split, args.data_dir, "auto")
            html = build_report(model, texts, labels, source=str(args.model_dir))
            html_path = write_report(html, Path(args.keep_html or Path(tmp) / "report.html")).resolve()
        out = Path(args.out).resolve()
        out.parent.mkdir(parents=True, exist_ok=True)
        command = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={Path(tmp) / 'profile'}",
                   f"--window-size={args.width},{args.height}", f"--screenshot={out}",
                   html_path.as_uri()]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    messages = console_messages(result.stderr)
    if result.returncode != 0 or not out.is_file():
        sys.exit(f"chromium failed (exit {result.returncode}):\n{result.stderr[-2000:]}")
    if messages:
        sys.exit("the page logged console messages:\n" + "\n".join(messages))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
