"""cscp: the Python client of the cscp PostgreSQL extension, on psycopg 3.

    from cscp import Cscp
    with Cscp.connect("dbname=app", tenant="acme") as cscp:
        cscp.doc_put(session_id="s-1", namespace="cart", payload={"items": 2}, ttl_seconds=600)
        print(cscp.doc_get(session_id="s-1", namespace="cart"))
"""
from ._call import UNSET, CscpError
from .client import AsyncCscp, Cscp

__all__ = ["Cscp", "AsyncCscp", "CscpError", "UNSET"]
__version__ = "0.2.0"
