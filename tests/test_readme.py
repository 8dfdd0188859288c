"""The README's Python example runs as written (with the data path filled in and fewer sweeps)."""
import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.data
def test_readme_python_example_runs(data_dir, tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert blocks, "README has no python example"
    code = blocks[0].replace('"path/to/data"', repr(str(data_dir)))
    code = code.replace("n_iter=200, burn_in=150", "n_iter=4, burn_in=2")
    assert "n_iter=4" in code  # the substitution must have happened
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {})
    out = capsys.readouterr().out.splitlines()
    assert 0.0 <= float(out[0]) <= 1.0  # the accuracy
    assert (tmp_path / "trec-model" / "model.json").is_file()
