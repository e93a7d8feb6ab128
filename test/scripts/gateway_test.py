"""The HTTPS gateway through real HTTP with Python requests (run by test/scripts/gateway-test.sh).

Environment: GW_URL, GW_CA (the self-signed certificate), GW_PID, GW_LOG, the keys GW_KEY_*, and
what restarts the cluster (CSCP_TMP, CSCP_PGOPTS, PG_BINDIR and the exported shell functions).
Each check raises AssertionError with what differed; the last one stops the gateway.
"""
import http.client
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse

import requests

URL = os.environ["GW_URL"]
CA = os.environ["GW_CA"]
KEY_PROFILE = os.environ["GW_KEY_PROFILE"]
KEY_CART = os.environ["GW_KEY_CART"]
KEY_OTHER = os.environ["GW_KEY_OTHER"]
KEY_READ = os.environ["GW_KEY_READ"]
KEY_REVOKE = os.environ["GW_KEY_REVOKE"]
HOST, PORT = urllib.parse.urlsplit(URL).hostname, urllib.parse.urlsplit(URL).port
os.environ["REQUESTS_CA_BUNDLE"] = CA

# The specification's Python functions, verbatim but for the host and the key.
SPEC_EXAMPLES = '''
import requests

def save_user_profile(session_id: str, name: str, language: str):
    api_url = f"https://api.orchestrator.example.com/v1/context/{session_id}/user_profile"
    headers = {
        "Authorization": "Bearer <bot_api_key>",
        "Content-Type": "application/json"
    }
    data = {
        "ttlSeconds": 3600, # Context will expire in 1 hour
        "payload": {
            "user_name": name,
            "preferred_language": language
        }
    }
    response = requests.post(api_url, headers=headers, json=data)
    response.raise_for_status()
    print("User profile context saved successfully.")

save_user_profile("session-xyz-123", "Alex", "en-US")

import requests

def get_user_profile(session_id: str) -> dict | None:
    api_url = f"https://api.orchestrator.example.com/v1/context/{session_id}/user_profile"
    headers = {"Authorization": "Bearer <bot_api_key>"}

    response = requests.get(api_url, headers=headers)

    if response.status_code == 200:
        return response.json()
    elif response.status_code == 404:
        print("No context found for this session.")
        return None
    else:
        response.raise_for_status()

profile = get_user_profile("session-xyz-123")
if profile:
    print(f"Retrieved user profile: {profile}")
'''


def auth(key):
    return {"Authorization": "Bearer " + key}


def doc_url(session, namespace):
    return "%s/v1/context/%s/%s" % (URL, urllib.parse.quote(session, safe=""),
                                     urllib.parse.quote(namespace, safe=""))


def post(key, session, namespace, payload, ttl=1800, **kw):
    return requests.post(doc_url(session, namespace), headers=auth(key),
                         json={"ttlSeconds": ttl, "payload": payload}, timeout=10, **kw)


def get(key, session, namespace, **kw):
    return requests.get(doc_url(session, namespace), headers=auth(key), timeout=10, **kw)


def expect(response, status, code=None, sqlstate=None):
    """Assert the status, and for an error its JSON code and SQLSTATE; returns the JSON body."""
    body = response.json() if response.content else None
    assert response.status_code == status, \
        "%s %s: expected %d, got %d %s" % (response.request.method, response.request.url, status,
                                           response.status_code, response.text)
    if code is not None:
        assert body["error"]["code"] == code, "expected code %s: %s" % (code, body)
        assert isinstance(body["error"]["message"], str) and body["error"]["message"]
        assert body["error"]["sqlstate"] == sqlstate, "expected SQLSTATE %s: %s" % (sqlstate, body)
        assert response.headers["Content-Type"] == "application/json"
    return body


def psql(sql):
    return subprocess.run(["psql", "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", "postgres",
                           "-c", sql], check=True, capture_output=True, text=True).stdout.strip()


def step(name):
    print("gateway-test: " + name, flush=True)


def spec_examples():
    step("the specification's Python functions")
    code = SPEC_EXAMPLES.replace("https://api.orchestrator.example.com", URL) \
                        .replace("<bot_api_key>", KEY_PROFILE)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True,
                         env=dict(os.environ, REQUESTS_CA_BUNDLE=CA)).stdout
    assert "User profile context saved successfully." in out, out
    assert "Retrieved user profile: {'user_name': 'Alex', 'preferred_language': 'en-US'}" in out, out


def multi_bot():
    step("two bots in one session, namespaces isolated")
    r = requests.post(URL + "/v1/context/session-abc-456/profile", headers=auth(KEY_PROFILE),
                      json={"payload": {"name": "Jane"}, "ttlSeconds": 1800}, timeout=10)
    body = expect(r, 201)
    assert body == {"documentKey": "session-abc-456:profile", "success": True}, body
    assert r.headers["Location"] == "/v1/context/session-abc-456/profile", r.headers
    r = requests.post(URL + "/v1/context/session-abc-456/cart", headers=auth(KEY_CART),
                      json={"payload": {"items": ["blue shirt"], "last_updated": "2026-05-01T12:00:00Z"},
                            "ttlSeconds": 1800}, timeout=10)
    expect(r, 201)
    assert expect(get(KEY_PROFILE, "session-abc-456", "profile"), 200) == {"name": "Jane"}
    assert expect(get(KEY_CART, "session-abc-456", "cart"), 200)["items"] == ["blue shirt"]
    # Merge-upsert: a new key added, an existing one overwritten, the other namespace untouched.
    expect(post(KEY_PROFILE, "session-abc-456", "profile", {"name": "Jane D.", "lang": "en"}), 201)
    assert expect(get(KEY_PROFILE, "session-abc-456", "profile"), 200) == {"name": "Jane D.", "lang": "en"}
    assert expect(get(KEY_CART, "session-abc-456", "cart"), 200)["items"] == ["blue shirt"]
    listing = expect(requests.get(URL + "/v1/context/session-abc-456", headers=auth(KEY_READ), timeout=10), 200)
    assert [n["namespace"] for n in listing["namespaces"]] == ["cart", "profile"], listing
    # Ids with reserved characters travel percent-encoded and come back unambiguous.
    r = post(KEY_PROFILE, "a:b/c", "x%y", {"k": 1})
    assert expect(r, 201)["documentKey"] == "a%3Ab/c:x%25y", r.text
    assert r.headers["Location"] == "/v1/context/a%3Ab%2Fc/x%25y", r.headers
    assert expect(get(KEY_PROFILE, "a:b/c", "x%y"), 200) == {"k": 1}
    # DELETE: 204, then 404.
    expect(requests.delete(doc_url("a:b/c", "x%y"), headers=auth(KEY_PROFILE), timeout=10), 204)
    expect(requests.delete(doc_url("a:b/c", "x%y"), headers=auth(KEY_PROFILE), timeout=10), 404,
           "not_found", "P0002")


def contexts_and_confirmations():
    step("contexts, a slot, a confirmation bound to its message; another tenant sees nothing")
    base = URL + "/v1/conversations/conv-http/actors/ana"
    ctx = expect(requests.post(base + "/context", headers=auth(KEY_PROFILE),
                               json={"slots": {"active_intent": "pay"}, "ttlSeconds": 600}, timeout=10), 200)
    assert ctx["status"] == "active" and ctx["slots"] == {"active_intent": "pay"}, ctx
    ctx = expect(requests.put(base + "/context/slots/active_target", headers=auth(KEY_PROFILE),
                              json="acct:1", timeout=10), 200)
    assert ctx["slots"]["active_target"] == "acct:1", ctx
    expect(requests.put(base + "/context/slots/nope", headers=auth(KEY_PROFILE), json=1, timeout=10), 400,
           "invalid_parameter", "22023")
    assert psql("SELECT state FROM cscp.command_submit('shop', 'conv-http', 'ana', 'pay-http-1', 'pay', true,"
                " '{m1}', '{\"amount\": 5}', 'acct:1')") == "confirmation_required"
    # Another tenant's key: no context, and a "yes" of it confirms nothing.
    expect(requests.get(base + "/context", headers=auth(KEY_OTHER), timeout=10), 404, "not_found", "P0002")
    other = expect(requests.post(base + "/confirmations", headers=auth(KEY_OTHER),
                                 json={"messageId": "m9", "answer": True}, timeout=10), 200)
    assert other["outcome"] == "no_context", other
    answer = {"messageId": "m2", "answer": True, "targetFingerprint": "acct:1"}
    first = expect(requests.post(base + "/confirmations", headers=auth(KEY_PROFILE), json=answer, timeout=10), 200)
    again = expect(requests.post(base + "/confirmations", headers=auth(KEY_PROFILE), json=answer, timeout=10), 200)
    assert first["outcome"] == "confirmed" and again == first, (first, again)
    assert psql("SELECT state FROM cscp.command WHERE tenant_id = 'shop' AND idempotency_key = 'pay-http-1'") == "confirmed"
    assert psql("SELECT message_ids FROM cscp.evidence WHERE tenant_id = 'shop'"
                " AND event_type = 'command.confirmation.satisfied'") == "{m1,m2}"
    ctx = expect(requests.get(base + "/context", headers=auth(KEY_READ), timeout=10), 403, "insufficient_scope", "42501")

    step("commands: submit (201, a replay 200), status by its Location, a transition; ids of others 404")
    cmd = {"idempotencyKey": "ship-http-1", "commandName": "ship", "messageIds": ["m5"], "payload": {"n": 1}}
    r = requests.post(base + "/commands", headers=auth(KEY_PROFILE), json=cmd, timeout=10)
    first = expect(r, 201)
    assert first["state"] == "confirmation_required" and first["replayed"] is False, first
    location = r.headers["Location"]
    assert location == "/v1/commands/" + first["commandId"], r.headers
    again = expect(requests.post(base + "/commands", headers=auth(KEY_PROFILE), json=cmd, timeout=10), 200)
    assert again["commandId"] == first["commandId"] and again["replayed"] is True, again
    status = expect(requests.get(URL + location, headers=auth(KEY_PROFILE), timeout=10), 200)
    assert status["state"] == "confirmation_required" and "confirmed" in status["nextAllowed"], status
    step_ = expect(requests.post(URL + location + "/transitions", headers=auth(KEY_PROFILE),
                                 json={"toState": "started"}, timeout=10), 200)
    assert step_ == {"accepted": False, "state": "confirmation_required", "reasonCode": "invalid_transition"}, step_
    step_ = expect(requests.post(URL + location + "/transitions", headers=auth(KEY_PROFILE),
                                 json={"toState": "canceled", "reasonCode": "user_left"}, timeout=10), 200)
    assert step_["accepted"] is True and step_["state"] == "canceled", step_
    expect(requests.get(URL + location, headers=auth(KEY_OTHER), timeout=10), 404, "not_found", "P0002")
    expect(requests.post(URL + location + "/transitions", headers=auth(KEY_OTHER), json={"toState": "failed"},
                         timeout=10), 404, "not_found", "P0002")
    expect(requests.get(URL + "/v1/commands/not-a-uuid", headers=auth(KEY_PROFILE), timeout=10), 400,
           "invalid_parameter", "22P02")


def planted_ids():
    step("planted ids: another tenant's rows carrying shop's context and command ids reach nothing of shop's")
    base = URL + "/v1/conversations/conv-plant/actors/ana"
    ctx = expect(requests.post(base + "/context", headers=auth(KEY_PROFILE),
                               json={"slots": {"active_intent": "pay"}}, timeout=10), 200)
    cmd = expect(requests.post(base + "/commands", headers=auth(KEY_PROFILE),
                               json={"idempotencyKey": "plant-1", "commandName": "pay", "messageIds": ["p1"]},
                               timeout=10), 201)
    assert cmd["state"] == "confirmation_required", cmd
    # other-shop plants, in its own rows, a context and a command with shop's ids.
    psql("INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, slots, expires_at, ttl)"
         " VALUES ('other-shop', '%s', 'conv-plant', 'ana', '{\"active_intent\": \"x\"}',"
         " cscp.now() + interval '1 hour', interval '1 hour')" % ctx["contextId"])
    psql("INSERT INTO cscp.command (tenant_id, command_id, idempotency_key, conversation_id, actor_id,"
         " command_name, mutating) VALUES ('other-shop', '%s', 'planted', 'conv-plant', 'ana', 'pay', true)"
         % cmd["commandId"])
    location = URL + "/v1/commands/" + cmd["commandId"]
    # other-shop's key reaches its own planted rows only.
    mine = expect(requests.get(location, headers=auth(KEY_OTHER), timeout=10), 200)
    assert mine["state"] == "received", mine
    step_ = expect(requests.post(location + "/transitions", headers=auth(KEY_OTHER),
                                 json={"toState": "canceled"}, timeout=10), 200)
    assert step_["state"] == "received", step_
    mine = expect(requests.put(base + "/context/slots/active_target", headers=auth(KEY_OTHER),
                               json="acct:other", timeout=10), 200)
    assert mine["contextId"] == ctx["contextId"] and mine["slots"]["active_intent"] == "x", mine
    expect(requests.delete(base + "/context/slots/active_target", headers=auth(KEY_OTHER), timeout=10), 200)
    assert expect(requests.get(base + "/context", headers=auth(KEY_OTHER), timeout=10), 200)["slots"] == \
        {"active_intent": "x"}
    # shop's own calls work, on shop's rows.
    theirs = expect(requests.get(location, headers=auth(KEY_PROFILE), timeout=10), 200)
    assert theirs["state"] == "confirmation_required", theirs
    theirs = expect(requests.put(base + "/context/slots/active_target", headers=auth(KEY_PROFILE),
                                 json="acct:shop", timeout=10), 200)
    assert theirs["slots"]["active_intent"] == "pay" and theirs["slots"]["active_target"] == "acct:shop", theirs
    expect(requests.delete(base + "/context/slots/active_target", headers=auth(KEY_PROFILE), timeout=10), 200)
    assert expect(requests.get(base + "/context", headers=auth(KEY_PROFILE), timeout=10), 200)["slots"]["active_intent"] == "pay"
    step_ = expect(requests.post(location + "/transitions", headers=auth(KEY_PROFILE),
                                 json={"toState": "canceled"}, timeout=10), 200)
    assert step_["accepted"] is True and step_["state"] == "canceled", step_
    assert psql("SELECT string_agg(tenant_id || ':' || state, ',' ORDER BY tenant_id) FROM cscp.command"
                " WHERE command_id = '%s'" % cmd["commandId"]) == "other-shop:received,shop:canceled"
    assert psql("SELECT string_agg(tenant_id || ':' || (slots ->> 'active_intent'), ',' ORDER BY tenant_id)"
                " FROM cscp.context WHERE context_id = '%s'" % ctx["contextId"]) == "other-shop:x,shop:pay"
    # An id of shop's that other-shop did not plant is 404, as an unknown one.
    expect(requests.get(URL + "/v1/commands/" + cmd["commandId"][:9] + "0000-4000-8000-000000000000",
                        headers=auth(KEY_OTHER), timeout=10), 404, "not_found", "P0002")


def facts():
    step("facts: a supersession chain and the context built from it; another tenant sees nothing")
    base = URL + "/v1/subjects/ana"
    r = requests.post(base + "/facts", headers=auth(KEY_PROFILE), json={"factId": "home-1", "key": "home_city", "value": "Porto"}, timeout=10)
    assert expect(r, 201)["factId"] == "home-1" and r.headers["Location"] == "/v1/subjects/ana/facts/home-1", r.headers
    expect(requests.post(base + "/facts", headers=auth(KEY_PROFILE),
                         json={"factId": "home-2", "key": "home_city", "value": "Lisbon", "supersedes": "home-1"}, timeout=10), 201)
    head = expect(requests.get(base + "/facts/home-1", headers=auth(KEY_PROFILE), timeout=10), 200)
    assert head["factId"] == "home-2" and head["value"] == "Lisbon", head
    built = expect(requests.post(base + "/context", headers=auth(KEY_PROFILE),
                                 json={"sessionId": "s-1", "query": "where does ana live"}, timeout=10), 200)
    assert built["fact_ids"] == ["home-2"] and "Porto" not in built["text"], built
    expect(requests.get(base + "/facts/home-2", headers=auth(KEY_OTHER), timeout=10), 404, "not_found", "P0002")
    other = expect(requests.post(base + "/context", headers=auth(KEY_OTHER), json={"sessionId": "s-1"}, timeout=10), 200)
    assert other["fact_ids"] == [], other


def conversations():
    step("conversations: start, exchange and close by ConversationResolve; replay; after close 400; another tenant 404")
    base = URL + "/v1/conversations/conv%2Fhttp"
    start = {"agentId": "supervisor", "causationId": "run-1",
             "initialTurn": {"from": "supervisor", "role": "agent", "content": {"text": "How can I help?"}, "ts": 1000}}
    r = requests.post(base, headers=auth(KEY_PROFILE), json=start, timeout=10)
    started = expect(r, 201)
    assert started == {"conversationId": "conv/http", "eventId": "conv/http:e0", "turnIndex": 0,
                       "messageId": "conv/http:0:agent"}, started
    assert r.headers["Location"] == "/v1/conversations/conv%2Fhttp", r.headers
    assert expect(requests.post(base, headers=auth(KEY_PROFILE), json=start, timeout=10), 200) == started
    turn = {"messageId": "wa-1", "from": "maria", "role": "user", "content": {"text": "Cancel order 17"}, "ts": 2000}
    first = expect(requests.post(base + "/turns", headers=auth(KEY_PROFILE),
                                 json={"operation": "exchange", "turn": turn}, timeout=10), 200)
    assert first["result"] == "exchanged" and first["turnIndex"] == 1 and first["turn"]["messageId"] == "wa-1", first
    # A re-delivery of the same turn replays it: the recorded turn, no new event.
    again = expect(requests.post(base + "/turns", headers=auth(KEY_PROFILE),
                                 json={"operation": "exchange", "turn": turn}, timeout=10), 200)
    assert again["result"] == "replayed" and again["turn"] == first["turn"], again
    closed = expect(requests.post(base + "/turns", headers=auth(KEY_PROFILE),
                                  json={"operation": "close", "outcome": {"status": "done"},
                                        "turn": {"from": "supervisor", "role": "agent", "content": "Canceled.", "ts": 3000}},
                                  timeout=10), 200)
    assert closed["result"] == "closed" and closed["turnIndex"] == 2, closed
    # After close: RFC 0005 section E's validation_error, nothing written.
    expect(requests.post(base + "/turns", headers=auth(KEY_PROFILE),
                         json={"operation": "exchange", "turn": {"from": "maria", "role": "user", "content": "and?", "ts": 4000}},
                         timeout=10), 400, "validation_error", "22023")
    conv = expect(requests.get(base, headers=auth(KEY_PROFILE), timeout=10), 200)
    assert conv["state"] == "closed" and conv["outcome"] == {"status": "done"}, conv
    assert [t["turnIndex"] for t in conv["turns"]] == [0, 1, 2], conv
    assert [e["type"] for e in conv["events"]] == ["conversation.opened", "conversation.exchanged",
                                                   "conversation.closed"], conv
    assert psql("SELECT count(*) FROM cscp.turn WHERE tenant_id = 'shop' AND conversation_id = 'conv/http'") == "3"
    # Another tenant's key: the conversation does not exist for it.
    expect(requests.get(base, headers=auth(KEY_OTHER), timeout=10), 404, "not_found", "P0002")
    expect(requests.post(base + "/turns", headers=auth(KEY_OTHER), json={"operation": "exchange", "turn": turn},
                         timeout=10), 404, "not_found", "P0002")
    # A documents-only key: 403; a body that is not a ConversationResolve: 400.
    expect(requests.get(base, headers=auth(KEY_READ), timeout=10), 403, "insufficient_scope", "42501")
    expect(requests.post(base + "/turns", headers=auth(KEY_PROFILE), json={"operation": "fork", "turn": turn},
                         timeout=10), 400, "validation_error", "22023")


def input_rules():
    step("input rules over HTTP: a card number in a slot 400 (not echoed), a ts of -5 or 1.5 400, "
         "a costly validation 422 at once; nothing written")
    base = URL + "/v1/conversations/conv-input/actors/ana"
    expect(requests.post(base + "/context", headers=auth(KEY_PROFILE), json={"slots": {}, "ttlSeconds": 600},
                         timeout=10), 200)
    for value in ("card 4111 1111 1111 1111", {"pan": "4111-1111-1111-1111"}, "x" * 257):
        r = requests.put(base + "/context/slots/x_note", headers=auth(KEY_PROFILE), json=value, timeout=10)
        expect(r, 400, "invalid_parameter", "22023")
        assert "4111" not in r.text, r.text
    r = requests.post(base + "/context", headers=auth(KEY_PROFILE), json={"slots": {"x_card": "5555555555554444"}},
                      timeout=10)
    expect(r, 400, "invalid_parameter", "22023")
    assert "5555" not in r.text, r.text
    assert psql("SELECT count(*) FROM cscp.context WHERE tenant_id = 'shop' AND conversation_id = 'conv-input'"
                " AND slots ?| ARRAY['x_note', 'x_card']") == "0"
    conv = URL + "/v1/conversations/conv-input"
    patterns = [{"pattern": "x%d|b" % i} for i in range(200)]
    expect(requests.post(conv, headers=auth(KEY_PROFILE), timeout=10,
                         json={"agentId": "bot", "schema": {"items": {"allOf": patterns}},
                               "initialTurn": {"from": "bot", "role": "agent", "content": [], "ts": 0}}), 201)
    for ts in (-5, 1.5):
        expect(requests.post(conv + "/turns", headers=auth(KEY_PROFILE), timeout=10,
                             json={"operation": "exchange", "turn": {"from": "ana", "role": "user", "content": [],
                                                                     "ts": ts}}), 400, "validation_error", "22023")
    started = time.monotonic()
    expect(requests.post(conv + "/turns", headers=auth(KEY_PROFILE), timeout=30,
                         json={"operation": "exchange", "turn": {"from": "ana", "role": "user", "content": ["b"] * 10000,
                                                                 "ts": 1}}), 422, "validation_too_costly", "54000")
    assert time.monotonic() - started < 5, time.monotonic() - started
    assert psql("SELECT count(*) FROM cscp.turn WHERE tenant_id = 'shop' AND conversation_id = 'conv-input'") == "1"


def expiry():
    step("expiry: 404 after the TTL")
    expect(post(KEY_PROFILE, "session-ttl", "profile", {"a": 1}, ttl=1), 201)
    expect(get(KEY_PROFILE, "session-ttl", "profile"), 200)
    time.sleep(1.3)
    expect(get(KEY_PROFILE, "session-ttl", "profile"), 404, "not_found", "P0002")
    # A POST into the expired document starts from empty: the old key does not come back.
    expect(post(KEY_PROFILE, "session-ttl", "profile", {"b": 2}, ttl=60), 201)
    assert expect(get(KEY_PROFILE, "session-ttl", "profile"), 200) == {"b": 2}


def error_statuses():
    step("every error status")
    u = doc_url("session-err", "ns")
    h = dict(auth(KEY_PROFILE), **{"Content-Type": "application/json"})
    expect(requests.post(u, headers=h, data='{"ttlSeconds": 60, "payload": {', timeout=10), 400, "bad_json", "22P02")
    expect(requests.post(u, headers=h, data='{"payload": {}}', timeout=10), 400, "missing_field", "22023")
    expect(requests.post(u, headers=h, data='{"ttlSeconds": 60}', timeout=10), 400, "missing_field", "22023")
    expect(requests.post(u, headers=h, data='{"ttlSeconds": 0, "payload": {}}', timeout=10), 400,
           "invalid_parameter", "22023")
    expect(requests.post(u, headers=h, data='{"ttlSeconds": 60, "payload": [1]}', timeout=10), 400,
           "invalid_parameter", "22023")
    expect(requests.post(u, headers=h, data=b'{"ttlSeconds": 60, "payload": {"a": "\xff"}}', timeout=10),
           400, "invalid_parameter", "22021")
    r = requests.get(u, timeout=10)
    expect(r, 401, "unauthorized", "28000")
    assert r.headers["WWW-Authenticate"] == 'Bearer realm="cscp"', r.headers
    # Headers come from the database as a JSON object and reach the client unescaped, exactly.
    r = requests.get(u, headers={"Authorization": "Bearer cscp_not-a-key"}, timeout=10)
    expect(r, 401, "unauthorized", "28000")
    assert r.headers["WWW-Authenticate"] == 'Bearer realm="cscp", error="invalid_token"', r.headers
    r = post(KEY_READ, "session-err", "ns", {"a": 1})
    assert r.headers["WWW-Authenticate"] == \
        'Bearer realm="cscp", error="insufficient_scope", scope="documents:write"', r.headers
    expect(post(KEY_PROFILE, "session-err", "ns", {"a": 1}), 201)
    r = get(KEY_PROFILE, "session-err", "ns")
    assert expect(r, 200) == {"a": 1} and r.headers["Cache-Control"] == "no-store", r.headers
    expect(requests.delete(doc_url("session-err", "ns"), headers=auth(KEY_PROFILE), timeout=10), 204)
    expect(requests.get(u, headers={"Authorization": "Basic dXNlcjpwYXNz"}, timeout=10), 401, "unauthorized", "28000")
    expect(post(KEY_READ, "session-err", "ns", {"a": 1}), 403, "insufficient_scope", "42501")
    expect(get(KEY_PROFILE, "session-err", "ns"), 404, "not_found", "P0002")
    expect(requests.get(URL + "/v2/nothing", timeout=10), 404, "route_not_found", "42883")
    r = requests.put(u, headers=h, data="{}", timeout=10)
    expect(r, 405, "method_not_allowed", "0A000")
    assert r.headers["Allow"] == "POST, GET, DELETE", r.headers
    expect(requests.post(u, headers=h, data='{"ttlSeconds": 60, "payload": {"a": "%s"}}' % ("x" * 70000),
                         timeout=10), 413, "payload_too_large", "54000")
    expect(requests.post(u, headers=dict(auth(KEY_PROFILE), **{"Content-Type": "text/plain"}),
                         data='{"ttlSeconds": 60, "payload": {}}', timeout=10), 415, "unsupported_media_type", "0A000")
    # A path that does not percent-decode (sent as is: requests would re-encode it).
    conn = http.client.HTTPSConnection(HOST, PORT, context=ssl.create_default_context(cafile=CA), timeout=10)
    conn.request("GET", "/v1/context/a%zzb/ns", headers=auth(KEY_PROFILE))
    r = conn.getresponse()
    body = json.loads(r.read())
    conn.close()
    assert r.status == 400 and body["error"]["code"] == "bad_path" and body["error"]["sqlstate"] == "22025", body
    # A body announced far over the limit is refused before it is sent.
    conn = http.client.HTTPSConnection(HOST, PORT, context=ssl.create_default_context(cafile=CA), timeout=10)
    conn.putrequest("POST", "/v1/context/session-err/ns")
    for k, v in dict(auth(KEY_PROFILE), **{"Content-Type": "application/json", "Content-Length": "100000000"}).items():
        conn.putheader(k, v)
    conn.endheaders()
    r = conn.getresponse()
    body = json.loads(r.read())
    conn.close()
    assert r.status == 413 and body["error"]["code"] == "payload_too_large", (r.status, body)
    # Headers over --max-header-bytes (16 KiB by default) are refused by the HTTP layer.
    r = requests.get(u, headers=dict(auth(KEY_PROFILE), **{"X-Padding": "x" * 20000}), timeout=10)
    assert r.status_code == 431, "oversized headers: %d %s" % (r.status_code, r.text[:200])
    # Nothing of those was written.
    assert psql("SELECT count(*) FROM cscp.document WHERE session_id = 'session-err'") == "0"


def oversized_chunked():
    step("an oversized body without Content-Length (chunked)")

    def chunks():
        for _ in range(80):
            yield b"x" * 1024
    r = requests.post(doc_url("session-err", "big"), headers=dict(auth(KEY_PROFILE), **{"Content-Type": "application/json"}),
                      data=chunks(), timeout=10)
    expect(r, 413, "payload_too_large", "54000")


def other_tenant_and_revoked():
    step("another tenant's key: 404, no existence leak")
    a = get(KEY_OTHER, "session-abc-456", "profile")
    b = get(KEY_OTHER, "session-never", "profile")
    expect(a, 404, "not_found", "P0002")
    assert a.json() == b.json() and a.headers.get("Content-Length") == b.headers.get("Content-Length")
    expect(requests.delete(doc_url("session-abc-456", "profile"), headers=auth(KEY_OTHER), timeout=10), 404)
    listing = expect(requests.get(URL + "/v1/context/session-abc-456", headers=auth(KEY_OTHER), timeout=10), 200)
    assert listing["namespaces"] == [], listing
    assert expect(get(KEY_PROFILE, "session-abc-456", "profile"), 200)["name"] == "Jane D."

    step("a revoked key: 401 from the next request on")
    expect(get(KEY_REVOKE, "session-abc-456", "profile"), 200)
    assert psql("SELECT cscp.api_key_revoke('shop', 'to-revoke')") == "t"
    expect(get(KEY_REVOKE, "session-abc-456", "profile"), 401, "unauthorized", "28000")


def tls_socket():
    ctx = ssl.create_default_context(cafile=CA)
    raw = socket.create_connection((HOST, PORT), timeout=10)
    return ctx.wrap_socket(raw, server_hostname=HOST)


def slow_and_idle_clients():
    step("a slow client holds no worker; an idle one is closed")
    # Slow clients, one per serving thread and more, each sending its headers a byte at a time.
    stop = threading.Event()
    slow = []
    for _ in range(6):
        s = tls_socket()
        slow.append(s)

    def dribble():
        req = b"GET /v1/context/session-abc-456/profile HTTP/1.1\r\nHost: localhost\r\nX-Slow: "
        i = 0
        while not stop.is_set():
            for s in slow:
                try:
                    s.send(req[i:i + 1] if i < len(req) else b"a")
                except OSError:
                    pass
            i += 1
            time.sleep(0.3)
    t = threading.Thread(target=dribble)
    t.start()
    try:
        time.sleep(0.5)
        with requests.Session() as s:
            for _ in range(20):
                t0 = time.monotonic()
                expect(s.get(doc_url("session-abc-456", "profile"), headers=auth(KEY_PROFILE), timeout=5), 200)
                assert time.monotonic() - t0 < 2, "a request waited behind slow clients"
    finally:
        stop.set()
        t.join()
        for s in slow:
            s.close()
    # A connection that sends nothing is closed after --idle-timeout (2 s).
    s = tls_socket()
    s.settimeout(8)
    t0 = time.monotonic()
    try:
        data = s.recv(1)
    except (ConnectionResetError, ssl.SSLError):
        data = b""
    waited = time.monotonic() - t0
    s.close()
    assert data == b"" and 1.0 < waited < 7, "idle connection: got %r after %.1fs" % (data, waited)


def concurrent_posts():
    step("concurrent POSTs to one document: no lost merge")
    errors = []

    def writer(i):
        try:
            with requests.Session() as s:
                for j in range(10):
                    r = s.post(doc_url("session-race", "doc"), headers=auth(KEY_PROFILE),
                               json={"ttlSeconds": 600, "payload": {"w%d_%d" % (i, j): j}}, timeout=30)
                    if r.status_code != 201:
                        errors.append(r.text)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))
    threads = [threading.Thread(target=writer, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    doc = expect(get(KEY_PROFILE, "session-race", "doc"), 200)
    assert len(doc) == 120, "expected 120 keys, found %d" % len(doc)


def keep_alive_and_metrics():
    step("keep-alive, /healthz, /metrics")
    with requests.Session() as s:
        for _ in range(5):
            expect(s.get(doc_url("session-abc-456", "profile"), headers=auth(KEY_PROFILE), timeout=5), 200)
    health = expect(requests.get(URL + "/healthz", timeout=5), 200)
    assert health == {"status": "ok", "database": "up"}, health
    m = requests.get(URL + "/metrics", timeout=5)
    assert m.status_code == 200 and m.headers["Content-Type"].startswith("text/plain"), m.headers
    text = m.text
    for line in ('cscp_gateway_requests_total{route="/v1/context/{session_id}/{namespace}",method="GET",status="200"}',
                 'cscp_gateway_requests_total{route="/v1/context/{session_id}/{namespace}",method="POST",status="201"}',
                 'cscp_gateway_requests_total{route="/v1/context/{session_id}/{namespace}",method="POST",status="413"}',
                 'cscp_gateway_request_duration_seconds_bucket{route="/v1/context/{session_id}/{namespace}",le="+Inf"}',
                 "cscp_gateway_pool_size 4", "cscp_gateway_pool_in_use ", "cscp_gateway_database_up 1"):
        assert line in text, "metrics lack %s" % line
    log = open(os.environ["GW_LOG"]).read()
    assert '"GET /v1/context/session-abc-456/profile" 200' in log, "no log line per request"
    assert KEY_PROFILE not in log, "the log holds an API key"


def openapi_routes():
    step("OpenAPI: served as committed; the gateway's routes and the document's are the same")
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    committed = json.load(open(os.path.join(root, "gateway", "openapi.json")))
    served = expect(requests.get(URL + "/v1/openapi.json", timeout=5), 200)
    assert served == committed, "the served document differs from gateway/openapi.json"
    assert committed["openapi"].startswith("3.1"), committed["openapi"]
    out = subprocess.run([os.path.join(root, "gateway", "cscp-gateway"), "--list-routes"],
                         check=True, capture_output=True, text=True).stdout
    served_routes = {tuple(line.split(" ", 1)) for line in out.splitlines()}
    documented = {(m.upper(), p) for p, item in committed["paths"].items()
                  for m in item if m in ("get", "post", "put", "patch", "delete", "head")}
    assert served_routes == documented, "served but undocumented: %s; documented but not served: %s" % (
        sorted(served_routes - documented), sorted(documented - served_routes))
    # Every documented route answers (none is the gateway's 404 or 405), with every status it
    # answers documented.
    for method, path in sorted(documented):
        u = URL + path.replace("{session_id}", "session-abc-456").replace("{namespace}", "profile") \
            .replace("{conversation_id}", "conv-openapi").replace("{actor_id}", "ana").replace("{slot}", "active_intent") \
            .replace("{command_id}", "00000000-0000-4000-8000-000000000000") \
            .replace("{subject_id}", "ana").replace("{fact_id}", "home-1")
        r = requests.request(method, u, headers=dict(auth(KEY_PROFILE), **{"Content-Type": "application/json"}),
                             data='{"ttlSeconds": 60, "payload": {"seen": true}}' if method in ("POST", "PUT") else None,
                             timeout=5)
        assert r.status_code not in (404, 405) or r.json()["error"]["code"] not in ("route_not_found", "method_not_allowed"), \
            "%s %s: %d %s" % (method, path, r.status_code, r.text)
        assert str(r.status_code) in committed["paths"][path][method.lower()]["responses"], \
            "%s %s answered %d, which is not documented" % (method, path, r.status_code)


def database_restart():
    step("a database restart mid-run: 503 while it is down, then recovery by itself")
    seen = []
    stop = threading.Event()

    def load():
        with requests.Session() as s:
            i = 0
            while not stop.is_set():
                i += 1
                try:
                    r = s.post(doc_url("session-restart", "ns"), headers=auth(KEY_PROFILE),
                               json={"ttlSeconds": 600, "payload": {"n": i}}, timeout=10)
                    seen.append(r.status_code)
                    if r.status_code == 503:
                        assert r.headers.get("Retry-After") == "1", r.headers
                        assert r.json()["error"]["code"] == "unavailable", r.text
                except requests.RequestException as e:
                    seen.append(repr(e))
                time.sleep(0.02)
    # An endpoint function missing from the database (an older cscp): its route answers 501 once
    # the connections are made again, the others work.
    psql("ALTER EXTENSION cscp DROP FUNCTION cscp.http_approve(text, text, text, text);"
         " DROP FUNCTION cscp.http_approve(text, text, text, text)")
    t = threading.Thread(target=load)
    t.start()
    time.sleep(0.5)
    subprocess.run(["bash", "-c", 'cluster_as_owner "$PG_BINDIR/pg_ctl" -D "$CSCP_TMP/data" -m fast -w stop'],
                   check=True, capture_output=True)
    time.sleep(1.0)
    down = expect(get(KEY_PROFILE, "session-abc-456", "profile"), 503, "unavailable", "08006")
    health = requests.get(URL + "/healthz", timeout=5).json()
    assert health["database"] == "down", health
    subprocess.run(["bash", "-c", "cluster_restart"], check=True, capture_output=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if get(KEY_PROFILE, "session-abc-456", "profile").status_code == 200:
            break
        time.sleep(0.1)
    time.sleep(0.5)
    stop.set()
    t.join()
    expect(get(KEY_PROFILE, "session-abc-456", "profile"), 200)
    expect(requests.post(URL + "/v1/conversations/conv-http/approvals", headers=auth(KEY_PROFILE),
                         json={"approverId": "boss", "messageId": "m7", "decision": True}, timeout=10),
           501, "not_implemented", "42883")
    unexpected = [s for s in seen if s not in (201, 503)]
    assert not unexpected, "during the restart: %s" % unexpected[:5]
    assert seen.count(503) > 0 and seen[-1] == 201, "expected 503s then 201s: %s" % seen[-10:]
    del down


def sigterm_drain():
    step("SIGTERM drains a request in flight, then the gateway exits")
    expect(post(KEY_PROFILE, "session-drain", "ns", {"before": True}), 201)
    # A session of the superuser holds the document's row: the POST waits inside the database.
    locker = subprocess.Popen(["psql", "-X", "-q", "-d", "postgres", "-c",
                               "BEGIN; SELECT 1 FROM cscp.document WHERE session_id = 'session-drain' FOR UPDATE;"
                               " SELECT pg_sleep(1.5); COMMIT;"], stdout=subprocess.DEVNULL)
    time.sleep(0.5)
    result = {}

    def slow_post():
        result["r"] = post(KEY_PROFILE, "session-drain", "ns", {"during": True})
    t = threading.Thread(target=slow_post)
    t.start()
    time.sleep(0.3)
    os.kill(int(os.environ["GW_PID"]), signal.SIGTERM)
    time.sleep(0.2)
    try:
        socket.create_connection((HOST, PORT), timeout=2).close()
        refused = False
    except OSError:
        refused = True
    t.join(15)
    locker.wait(15)
    expect(result["r"], 201)
    assert refused, "the gateway still accepted connections after SIGTERM"
    doc = json.loads(psql("SELECT payload FROM cscp.document WHERE session_id = 'session-drain'"))
    assert doc == {"before": True, "during": True}, doc
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "cscp-gateway: stopped" not in open(os.environ["GW_LOG"]).read():
        time.sleep(0.1)
    log = open(os.environ["GW_LOG"]).read()
    assert "SIGTERM: draining" in log and "cscp-gateway: stopped" in log, log[-500:]


def main():
    spec_examples()
    multi_bot()
    contexts_and_confirmations()
    planted_ids()
    facts()
    conversations()
    input_rules()
    expiry()
    error_statuses()
    oversized_chunked()
    other_tenant_and_revoked()
    slow_and_idle_clients()
    concurrent_posts()
    keep_alive_and_metrics()
    openapi_routes()
    database_restart()
    sigterm_drain()


if __name__ == "__main__":
    main()
