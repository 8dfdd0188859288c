"""studies.common.reports: records that several processes of one study write side by side."""
import multiprocessing

from studies.common.reports import add_cell, load_cells


def _add_many(path, worker, n):
    record = load_cells(path)
    for i in range(n):
        add_cell(path, record, f"w{worker}|{i}", {"accuracy": i / n})


def test_cells_added_by_processes_side_by_side_are_all_kept(tmp_path):
    """Each process loaded the record once and adds its cells; none drops another's (each
    add reads the file again under a lock, as two seeds of Table 4 run at once)."""
    path = tmp_path / "record.json"
    add_cell(path, load_cells(path), "first", {"accuracy": 1.0})
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_add_many, args=(path, w, 25)) for w in range(3)]
    for p in workers:
        p.start()
    for p in workers:
        p.join(60)
    assert [p.exitcode for p in workers] == [0, 0, 0]
    cells = load_cells(path)["cells"]
    assert set(cells) == {"first"} | {f"w{w}|{i}" for w in range(3) for i in range(25)}
    record = {"cells": {}}
    add_cell(path, record, "last", {"accuracy": 0.5})
    assert len(record["cells"]) == len(cells) + 1     # the caller's copy sees every cell
