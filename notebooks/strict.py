# Jupyter nbconvert configuration for druto's GoNB notebooks:
#
#   jupyter nbconvert --config notebooks/strict.py --to notebook --execute ...
#
# GoNB reports a cell whose program fails (a panic, nbui.Check's exit, any
# non-zero exit or a signal) only as a stderr stream ending in "exit status
# N", and answers Jupyter with status "ok", so nbconvert would go on to the
# next cell and exit 0. This hook turns such a cell into a failed one, as a
# compile error already is: nbconvert stops there and exits non-zero, with
# the cell's stderr as the error.
import re

_FAILED = re.compile(r"^(exit status \d+|signal: .+)$", re.M)


def _fail_on_exit(cell, cell_index, execute_reply):
    if execute_reply is None:
        return
    content = execute_reply["content"]
    if content.get("status") != "ok":
        return
    err = "".join(
        "".join(o["text"]) if isinstance(o["text"], list) else o["text"]
        for o in cell.get("outputs", [])
        if o.get("output_type") == "stream" and o.get("name") == "stderr"
    )
    m = _FAILED.search(err)
    if m:
        content.update(
            status="error",
            ename="CellFailed",
            evalue="cell %d: %s" % (cell_index, m.group(1)),
            traceback=err.rstrip("\n").split("\n"),
        )


c = get_config()  # noqa: F821 (Jupyter's config loader defines it)
c.ExecutePreprocessor.on_cell_executed = _fail_on_exit
