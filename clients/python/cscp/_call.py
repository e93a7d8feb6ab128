"""The one path every call takes: one transaction, the tenant named with SET LOCAL
cscp.tenant_id, database errors turned into CscpError."""
from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.types.json import Jsonb

Json = Any


class _Unset:
    def __repr__(self) -> str:
        return "UNSET"


#: An argument left out: the SQL function's default applies.
UNSET: Any = _Unset()


class CscpError(Exception):
    """An error raised by the database, with its SQLSTATE (cscp's are listed in its README)."""

    def __init__(self, message: str, sqlstate: str | None, detail: str | None = None,
                 hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.sqlstate = sqlstate
        self.detail = detail
        self.hint = hint

    def __str__(self) -> str:
        return f"{self.message} (SQLSTATE {self.sqlstate})"

    @classmethod
    def from_psycopg(cls, err: psycopg.Error) -> "CscpError":
        diag = err.diag
        return cls(diag.message_primary or str(err), err.sqlstate, diag.message_detail, diag.message_hint)


def call_sql(fn: str, params: list[tuple[str, str]], args: dict[str, Any]) -> tuple[sql.Composed, list[Any]]:
    """The SQL of a call of cscp.fn with the arguments given by name, each cast to its type."""
    parts = []
    values = []
    for name, typ in params:
        value = args.get(name, UNSET)
        if value is UNSET:
            continue
        if value is not None and typ in ("jsonb", "json"):
            value = Jsonb(value)
        values.append(value)
        # the type comes from cscp's catalog (format_type), never from the caller
        parts.append(sql.SQL("{} => %s::{}").format(sql.Identifier(name), sql.SQL(typ)))
    call = sql.SQL("cscp.{}({})").format(sql.Identifier(fn), sql.SQL(", ").join(parts))
    return call, values


def wrap(call: sql.Composed, kind: str) -> sql.Composed:
    if kind in ("rows", "row"):
        return sql.SQL("SELECT * FROM {}").format(call)
    return sql.SQL("SELECT {} AS v").format(call)


def read(rows: list[dict[str, Any]], kind: str) -> Any:
    if kind == "rows":
        return rows
    if kind == "row":
        return rows[0] if rows else None
    if kind == "values":
        return [r["v"] for r in rows]
    if kind == "value":
        return rows[0]["v"] if rows else None
    return None
