"""Fixed-width text tables, their status cells and their legends. No torch here."""

from __future__ import annotations

from typing import Optional, Sequence


def fmt(x: Optional[float], spec: str) -> str:
    """A number in ``spec``, or "-" where there is none."""
    return "-" if x is None else format(x, spec)


def status_text(row: dict, tol_spec: str = ".1e") -> str:
    """The status cell: OK, WRONG with the bound it failed, or ERROR with the error's first line."""
    if row["status"] == "WRONG":
        return f"WRONG (tol {row['tol']:{tol_spec}})"
    if row["status"] == "ERROR":
        return f"ERROR: {row['error']}"
    return row["status"]


def fixed_width(header: Sequence[str], lines: Sequence[Sequence[str]], numeric: set[int]) -> str:
    """Columns padded to their widest cell, the ``numeric`` ones right-aligned, a rule under the
    header."""
    widths = [max(len(h), *(len(line[i]) for line in lines)) if lines else len(h) for i, h in enumerate(header)]

    def fmt_line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([fmt_line(header), fmt_line(["-" * w for w in widths]), *map(fmt_line, lines)])


def legend(entries: Sequence[tuple[str, str]]) -> str:
    """``name  meaning`` lines under a table, the names aligned."""
    width = max(len(name) for name, _ in entries)
    return "\n".join(f"  {name:<{width}}  {meaning}" for name, meaning in entries)
