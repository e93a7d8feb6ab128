"""The Python client: the typed API sync and async, the tenant per call, CscpError's SQLSTATE."""
import asyncio
import threading

import psycopg
import pytest

from cscp import UNSET, AsyncCscp, Cscp, CscpError
from conftest import BOUND_TENANT


def test_calls_by_keyword_with_the_tenant_of_the_call(bound_conninfo):
    with Cscp.connect(bound_conninfo) as cscp:
        ctx = cscp.context_open(tenant_id=BOUND_TENANT, conversation_id="c-1", actor_id="u-1",
                                slots={"active_intent": "cancel_order"})
        assert ctx["status"] == "active"
        assert ctx["slots"]["active_intent"] == "cancel_order"
        key = cscp.doc_put(tenant_id=BOUND_TENANT, session_id="s-1", namespace="cart",
                           payload={"items": [1, 2]}, ttl_seconds=60)
        assert key == "s-1:cart"
        assert cscp.doc_get(tenant_id=BOUND_TENANT, session_id="s-1", namespace="cart") == {"items": [1, 2]}


def test_own_tenant_fills_calls_that_name_none(app_conninfo, tenant):
    with Cscp.connect(app_conninfo, tenant=tenant) as cscp:
        cscp.store_put(namespace=["a", "b"], key="k", value={"v": 1})
        [item] = cscp.store_get(namespace=["a", "b"], key="k")
        assert item["item_value"] == {"v": 1}
        assert item["item_namespace"] == ["a", "b"]
        assert cscp.store_list_namespaces(prefix=["a"]) == [["a", "b"]]


def test_errors_carry_sqlstate_detail_hint(bound_conninfo):
    with Cscp.connect(bound_conninfo) as cscp:
        with pytest.raises(CscpError) as bad:
            cscp.doc_put(tenant_id=BOUND_TENANT, session_id="", namespace="cart", payload={}, ttl_seconds=60)
        assert bad.value.sqlstate == "22023"
        with pytest.raises(CscpError) as other:
            cscp.doc_get(tenant_id="someone-else", session_id="s", namespace="n")
        assert other.value.sqlstate == "42501"
        assert "bound to other tenants" in other.value.detail
        # the connection is usable after an error
        assert cscp.doc_get(tenant_id=BOUND_TENANT, session_id="none", namespace="n") is None


def test_defaults_apply_to_arguments_left_out(app_conninfo, tenant):
    with Cscp.connect(app_conninfo, tenant=tenant) as cscp:
        cscp.session_add_items(session_id="s", items=[{"n": i} for i in range(5)])
        assert [i["n"] for i in cscp.session_get_items(session_id="s")] == [0, 1, 2, 3, 4]
        assert [i["n"] for i in cscp.session_get_items(session_id="s", row_limit=2)] == [3, 4]
        assert cscp.session_get_items(session_id="s", row_limit=UNSET) == cscp.session_get_items(session_id="s")


def test_checkpoint_functions_round_trip_bytes(app_conninfo, tenant):
    with Cscp.connect(app_conninfo, tenant=tenant) as cscp:
        cscp.checkpoint_put(thread_id="t", checkpoint_ns="", checkpoint_id="c-1", parent_checkpoint_id=None,
                            checkpoint={"v": 4, "channel_versions": {"m": 1}}, metadata={"step": 0},
                            channels=["m"], versions=["1"], types=["bytes"], blobs=[b"\x00\x01"])
        [row] = cscp.checkpoint_get_tuple(thread_id="t")
        assert row["id"] == "c-1" and row["blob_channels"] == ["m"] and row["blobs"] == [b"\x00\x01"]
        assert cscp.checkpoint_delete_thread(thread_id="t") is True
        assert cscp.checkpoint_get_tuple(thread_id="t") == []


def test_transaction_rolls_back_together(app_conninfo, tenant):
    with Cscp.connect(app_conninfo, tenant=tenant) as cscp:
        with pytest.raises(RuntimeError):
            with cscp.transaction() as cur:
                cur.execute("SELECT cscp.store_put(%s, '{tx}', 'k', '{}')", (tenant,))
                raise RuntimeError("abort")
        assert cscp.store_get(namespace=["tx"], key="k") == []


def test_sessions_lose_nothing_under_concurrent_first_writers(app_conninfo, tenant):
    errors = []

    def writer(i):
        try:
            with Cscp.connect(app_conninfo, tenant=tenant) as c:
                c.session_add_items(session_id="race", items=[{"n": i, "part": 0}, {"n": i, "part": 1}])
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with Cscp.connect(app_conninfo, tenant=tenant) as cscp:
        items = cscp.session_get_items(session_id="race")
    assert len(items) == 16
    assert all(items[i]["n"] == items[i + 1]["n"] for i in range(0, 16, 2))


def test_async_client(app_conninfo, tenant):
    async def main():
        async with await AsyncCscp.connect(app_conninfo, tenant=tenant) as cscp:
            await cscp.store_put(namespace=["docs"], key="d-1", value={"text": "green tea ceremony"})
            await cscp.store_put(namespace=["docs"], key="d-2", value={"text": "coffee"})
            hits = await cscp.store_search(namespace_prefix=["docs"], query="tea")
            assert [h["item_key"] for h in hits] == ["d-1"]
            assert hits[0]["score"] > 0
            with pytest.raises(CscpError) as err:
                await cscp.store_put(namespace=[], key="k", value={})
            assert err.value.sqlstate == "22023"
            # two async clients adding at once: both batches kept
            async with await AsyncCscp.connect(app_conninfo, tenant=tenant) as other:
                await asyncio.gather(cscp.session_add_items(session_id="a", items=[{"n": 1}]),
                                     other.session_add_items(session_id="a", items=[{"n": 2}]))
            assert sorted(i["n"] for i in await cscp.session_get_items(session_id="a")) == [1, 2]

    asyncio.run(main())


def test_wraps_an_existing_connection(app_conninfo, tenant):
    with psycopg.connect(app_conninfo, autocommit=True) as conn:
        cscp = Cscp(conn, tenant=tenant)
        assert cscp.policy_effective(tenant_id=tenant)["checkpoint_ttl"] == "30 days"
