"""Cscp and AsyncCscp: cscp's public SQL API as typed methods over a psycopg 3 connection."""
from __future__ import annotations

from contextlib import asynccontextmanager, contextmanager
from typing import Any, AsyncIterator, Iterator

import psycopg
from psycopg.rows import dict_row

from ._call import CscpError, call_sql, read, wrap
from .api import AsyncCscpApi, CscpApi

_SET_TENANT = "SELECT pg_catalog.set_config('cscp.tenant_id', %s, true)"


def _tenant(params, args: dict[str, Any], default: str | None) -> tuple[dict[str, Any], str | None]:
    from ._call import UNSET
    if any(n == "tenant_id" for n, _ in params):
        if args.get("tenant_id", UNSET) is UNSET and default is not None:
            args = {**args, "tenant_id": default}
        t = args.get("tenant_id", UNSET)
        return args, (t if isinstance(t, str) else default)
    return args, default


class Cscp(CscpApi):
    """Every public function of cscp as a method, e.g.
    ``cscp.context_open(tenant_id="acme", conversation_id="c-1", actor_id="u-1")``.

    Each call runs in a transaction of its own (a savepoint when the connection is already in
    one) with ``SET LOCAL cscp.tenant_id`` to the call's tenant_id or the client's tenant;
    database errors are raised as CscpError with the SQLSTATE, message, detail and hint.
    """

    def __init__(self, conn: psycopg.Connection, tenant: str | None = None) -> None:
        self.conn = conn
        self.tenant = tenant

    @classmethod
    def connect(cls, conninfo: str = "", tenant: str | None = None, **kwargs: Any) -> "Cscp":
        """A client on a new autocommit connection (closed by close())."""
        return cls(psycopg.connect(conninfo, autocommit=True, **kwargs), tenant)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> "Cscp":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def transaction(self, tenant: str | None = None) -> Iterator[psycopg.Cursor]:
        """One transaction for tenant (default: the client's); yields a cursor returning dicts."""
        tenant = tenant if tenant is not None else self.tenant
        try:
            with self.conn.transaction():
                with self.conn.cursor(row_factory=dict_row) as cur:
                    if tenant is not None:
                        cur.execute(_SET_TENANT, (tenant,))
                    yield cur
        except psycopg.Error as err:
            raise CscpError.from_psycopg(err) from err

    def _call(self, fn, params, args, kind):
        args, tenant = _tenant(params, args, self.tenant)
        call, values = call_sql(fn, params, args)
        with self.transaction(tenant) as cur:
            cur.execute(wrap(call, kind), values)
            rows = cur.fetchall()
        return read(rows, kind)


class AsyncCscp(AsyncCscpApi):
    """Cscp on a psycopg.AsyncConnection: the same methods, awaited."""

    def __init__(self, conn: psycopg.AsyncConnection, tenant: str | None = None) -> None:
        self.conn = conn
        self.tenant = tenant

    @classmethod
    async def connect(cls, conninfo: str = "", tenant: str | None = None, **kwargs: Any) -> "AsyncCscp":
        return cls(await psycopg.AsyncConnection.connect(conninfo, autocommit=True, **kwargs), tenant)

    async def close(self) -> None:
        await self.conn.close()

    async def __aenter__(self) -> "AsyncCscp":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @asynccontextmanager
    async def transaction(self, tenant: str | None = None) -> AsyncIterator[psycopg.AsyncCursor]:
        tenant = tenant if tenant is not None else self.tenant
        try:
            async with self.conn.transaction():
                async with self.conn.cursor(row_factory=dict_row) as cur:
                    if tenant is not None:
                        await cur.execute(_SET_TENANT, (tenant,))
                    yield cur
        except psycopg.Error as err:
            raise CscpError.from_psycopg(err) from err

    async def _call(self, fn, params, args, kind):
        args, tenant = _tenant(params, args, self.tenant)
        call, values = call_sql(fn, params, args)
        async with self.transaction(tenant) as cur:
            await cur.execute(wrap(call, kind), values)
            rows = await cur.fetchall()
        return read(rows, kind)
