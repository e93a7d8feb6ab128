\i sql/include/helpers.sql
-- The HTTPS gateway's semantics, without a network: API keys (hash only, one tenant, scopes,
-- expiry, revocation, last use), each endpoint's status, headers and body, the tenant bound to
-- the key for the call only, and what the gateway's role and an application role may do.
SET timezone = 'UTC';
SET cscp.clock = '2026-05-01 12:00:00+00';

-- Keys: returned once, stored as a SHA-256 only.
SELECT cscp.api_key_create('gw1', 'profile-bot') AS k1 \gset
SELECT cscp.api_key_create('gw1', 'reader', ARRAY['documents:read']) AS kread \gset
SELECT cscp.api_key_create('gw1', 'writer', ARRAY['documents:write']) AS kwrite \gset
SELECT cscp.api_key_create('gw2', 'other-tenant') AS k2 \gset
SELECT cscp.api_key_create('gw1', 'short-lived', NULL, '2026-05-01 12:10:00+00') AS kshort \gset
SELECT :'k1' ~ '^cscp_Z3cx\.[A-Za-z0-9_-]{43}$' AS key_format, :'k1' <> :'kread' AS keys_differ;
-- The tenant a key names, for a proxy's routing (the key itself is checked by its hash).
SELECT cscp.http_key_tenant('Bearer ' || :'k1') AS k1_tenant, cscp.http_key_tenant('Bearer ' || :'k2') AS k2_tenant,
       cscp.http_key_tenant('Bearer cscp_' || cscp._base64url(convert_to('tenant: é/ü', 'UTF8')) || '.x') AS encoded,
       cscp.http_key_tenant('Bearer cscp_AAAAA.x') AS bad_length, cscp.http_key_tenant('Bearer cscp__w.x') AS not_utf8,
       cscp.http_key_tenant('Basic x') AS not_bearer;
SELECT tenant_id, label, scopes, octet_length(key_hash) AS hash_bytes,
       key_hash = sha256(convert_to(CASE label WHEN 'profile-bot' THEN :'k1' WHEN 'reader' THEN :'kread'
                                               WHEN 'writer' THEN :'kwrite' WHEN 'other-tenant' THEN :'k2'
                                               ELSE :'kshort' END, 'UTF8')) AS hash_matches,
       expires_at, revoked_at, last_used_at
  FROM cscp.api_key ORDER BY tenant_id, label;
SELECT count(*) AS key_text_stored FROM cscp.api_key k
 WHERE strpos(k::text, split_part(:'k1', '.', 2)) > 0 OR strpos(encode(k.key_hash, 'escape'), :'k1') > 0;

-- The specification's example: POST, then GET.
SELECT * FROM cscp.http_doc_put('Bearer ' || :'k1', 'session-xyz-123', 'user_profile', 'application/json',
    '{"ttlSeconds": 3600, "payload": {"user_name": "Alex", "preferred_language": "en-US"}}');
SELECT * FROM cscp.http_doc_get('Bearer ' || :'k1', 'session-xyz-123', 'user_profile');
-- Merge-upsert: existing keys overwritten, new ones added; the same payload again changes nothing.
SELECT status, body FROM cscp.http_doc_put('bearer ' || :'k1', 'session-xyz-123', 'user_profile',
    'application/json; charset=utf-8', '{"ttlSeconds": 60, "payload": {"preferred_language": "nl-NL", "vip": true}}');
SELECT status, body FROM cscp.http_doc_put('Bearer ' || :'k1', 'session-xyz-123', 'user_profile',
    'application/json', '{"ttlSeconds": 60, "payload": {"preferred_language": "nl-NL", "vip": true}}');
SELECT body FROM cscp.http_doc_get('Bearer ' || :'k1', 'session-xyz-123', 'user_profile');
-- Each POST resets the timer: 60 s from the last one, then 404.
SELECT expires_at FROM cscp.document WHERE tenant_id = 'gw1' AND session_id = 'session-xyz-123';

-- The multi-bot scenario: two namespaces of one session never touch each other.
SELECT status FROM cscp.http_doc_put('Bearer ' || :'k1', 'session-abc-456', 'profile', 'application/json',
    '{"payload": {"name": "Jane"}, "ttlSeconds": 1800}');
SELECT status FROM cscp.http_doc_put('Bearer ' || :'kwrite', 'session-abc-456', 'cart', 'application/json',
    '{"payload": {"items": ["blue shirt"], "last_updated": "2026-05-01T12:00:00Z"}, "ttlSeconds": 1800}');
SELECT body FROM cscp.http_doc_get('Bearer ' || :'kread', 'session-abc-456', 'profile');
SELECT body FROM cscp.http_doc_get('Bearer ' || :'kread', 'session-abc-456', 'cart');
SELECT * FROM cscp.http_doc_list('Bearer ' || :'kread', 'session-abc-456');
SELECT * FROM cscp.doc_list('gw1', 'session-abc-456');

-- Ids with ':' and '/' and '%': an unambiguous documentKey, a percent-encoded Location.
SELECT * FROM cscp.http_doc_put('Bearer ' || :'k1', 'a:b/c', 'n%s:x é', 'application/json',
    '{"ttlSeconds": 60, "payload": {}}');
SELECT cscp.http_document_key('a:b', 'c') AS k_ab_c, cscp.http_document_key('a', 'b:c') AS k_a_bc;

-- Expiry: 404 once the TTL has passed, though no sweep has run.
SET cscp.clock = '2026-05-01 12:01:01+00';
SELECT * FROM cscp.http_doc_get('Bearer ' || :'k1', 'session-xyz-123', 'user_profile');
SELECT count(*) AS still_stored FROM cscp.document WHERE tenant_id = 'gw1' AND session_id = 'session-xyz-123';

-- DELETE: 204, then 404; the other namespace stays.
SELECT * FROM cscp.http_doc_delete('Bearer ' || :'k1', 'session-abc-456', 'cart');
SELECT * FROM cscp.http_doc_delete('Bearer ' || :'k1', 'session-abc-456', 'cart');
SELECT status, body FROM cscp.http_doc_get('Bearer ' || :'k1', 'session-abc-456', 'cart');
SELECT status, body FROM cscp.http_doc_get('Bearer ' || :'k1', 'session-abc-456', 'profile');

-- Another tenant's key: 404 for gw1's document, exactly as for an absent one; its own
-- namespace of the same name is separate; gw1's document is untouched.
SELECT * FROM cscp.http_doc_get('Bearer ' || :'k2', 'session-abc-456', 'profile');
SELECT * FROM cscp.http_doc_delete('Bearer ' || :'k2', 'session-abc-456', 'profile');
SELECT body FROM cscp.http_doc_list('Bearer ' || :'k2', 'session-abc-456');
SELECT status FROM cscp.http_doc_put('Bearer ' || :'k2', 'session-abc-456', 'profile', 'application/json',
    '{"payload": {"name": "Mallory"}, "ttlSeconds": 1800}');
SELECT tenant_id, payload FROM cscp.document WHERE tenant_id IN ('gw1', 'gw2') AND session_id = 'session-abc-456' ORDER BY tenant_id;

-- 401: no key, not a bearer key, an unknown key, a revoked key, an expired key.
SELECT * FROM cscp.http_doc_get(NULL, 'session-abc-456', 'profile');
SELECT * FROM cscp.http_doc_get('Basic dXNlcjpwYXNz', 'session-abc-456', 'profile');
SELECT * FROM cscp.http_doc_get('Bearer cscp_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA', 'session-abc-456', 'profile');
SELECT status, body FROM cscp.http_doc_get('Bearer ' || :'kshort', 'session-abc-456', 'profile');
SET cscp.clock = '2026-05-01 12:10:00+00';
SELECT status, body FROM cscp.http_doc_get('Bearer ' || :'kshort', 'session-abc-456', 'profile');
SELECT cscp.api_key_revoke('gw1', 'reader') AS revoked, cscp.api_key_revoke('gw1', 'reader') AS revoked_again;
SELECT status, body FROM cscp.http_doc_get('Bearer ' || :'kread', 'session-abc-456', 'profile');

-- The shapes of the Authorization header (checked in C): as the pattern
-- '^\s*bearer +(\S+)\s*$' (the scheme in any case) reads them, no more, no less.
SELECT label, (a).tenant_id, ((a).failure).body -> 'error' ->> 'message' AS message,
       ((a).tenant_id IS NOT NULL) = coalesce(substring(h, '^\s*[Bb][Ee][Aa][Rr][Ee][Rr] +([^\s]+)\s*$') = :'k1', false)
           AS as_the_pattern
  FROM (SELECT label, h, cscp._http_auth(h, 'documents:read') AS a FROM (VALUES
    ('spaces and newline around', E'  Bearer ' || :'k1' || E' \t\r\n'),
    ('scheme in capitals, spaces', 'BEARER    ' || :'k1'),
    ('tab after the scheme', E'Bearer\t' || :'k1'),
    ('two tokens', 'Bearer ' || :'k1' || ' x'),
    ('scheme glued to the key', 'Bearer' || :'k1'),
    ('scheme alone', 'Bearer '),
    ('blank', E' \t '),
    ('empty', '')) AS v(label, h)) AS t;

-- 403: a read-only key cannot write, a write-only key cannot read; nothing is written.
\set kread_old :kread
SELECT cscp.api_key_create('gw1', 'reader2', ARRAY['documents:read']) AS kread \gset
SELECT * FROM cscp.http_doc_put('Bearer ' || :'kread', 'session-abc-456', 'profile', 'application/json',
    '{"payload": {"name": "Eve"}, "ttlSeconds": 1800}');
SELECT status, body FROM cscp.http_doc_delete('Bearer ' || :'kread', 'session-abc-456', 'profile');
SELECT status, body FROM cscp.http_doc_get('Bearer ' || :'kwrite', 'session-abc-456', 'profile');
SELECT status, body FROM cscp.http_doc_list('Bearer ' || :'kwrite', 'session-abc-456');
SELECT payload FROM cscp.document WHERE tenant_id = 'gw1' AND session_id = 'session-abc-456';

-- Bad requests: a JSON error with a stable code and the SQLSTATE behind it, nothing written.
CREATE TEMP TABLE doc_before AS SELECT * FROM cscp.document;
SELECT label, r.status, r.body -> 'error' ->> 'code' AS code, r.body -> 'error' ->> 'sqlstate' AS sqlstate,
       r.body -> 'error' ->> 'message' AS message
  FROM (VALUES
    ('text/plain', 'text/plain', '{"ttlSeconds": 60, "payload": {}}', 's', 'n'),
    ('no content type', NULL, '{"ttlSeconds": 60, "payload": {}}', 's', 'n'),
    ('empty body', 'application/json', '', 's', 'n'),
    ('null body', 'application/json', NULL, 's', 'n'),
    ('bad json', 'application/json', '{"ttlSeconds": 60, "payload": {', 's', 'n'),
    ('nul escape', 'application/json', '{"ttlSeconds": 60, "payload": {"a": "\u0000"}}', 's', 'n'),
    ('array body', 'application/json', '[1, 2]', 's', 'n'),
    ('no ttlSeconds', 'application/json', '{"payload": {}}', 's', 'n'),
    ('no payload', 'application/json', '{"ttlSeconds": 60}', 's', 'n'),
    ('ttl string', 'application/json', '{"ttlSeconds": "60", "payload": {}}', 's', 'n'),
    ('ttl fraction', 'application/json', '{"ttlSeconds": 1.5, "payload": {}}', 's', 'n'),
    ('ttl huge', 'application/json', '{"ttlSeconds": 1e30, "payload": {}}', 's', 'n'),
    ('ttl zero', 'application/json', '{"ttlSeconds": 0, "payload": {}}', 's', 'n'),
    ('ttl beyond policy', 'application/json', '{"ttlSeconds": 2000000000, "payload": {}}', 's', 'n'),
    ('payload array', 'application/json', '{"ttlSeconds": 60, "payload": [1]}', 's', 'n'),
    ('payload null', 'application/json', '{"ttlSeconds": 60, "payload": null}', 's', 'n'),
    ('long session id', 'application/json', '{"ttlSeconds": 60, "payload": {}}', repeat('s', 300), 'n'),
    ('empty namespace', 'application/json', '{"ttlSeconds": 60, "payload": {}}', 's', '')
  ) AS t(label, ctype, body, sess, ns),
  LATERAL cscp.http_doc_put('Bearer ' || :'k1', t.sess, t.ns, t.ctype, t.body) r;
SELECT status, body -> 'error' ->> 'code' AS code FROM cscp.http_doc_get('Bearer ' || :'k1', repeat('s', 300), 'n');
SELECT status, body -> 'error' ->> 'code' AS code FROM cscp.http_doc_list('Bearer ' || :'k1', '');
SELECT (SELECT count(*) FROM cscp.document) - (SELECT count(*) FROM doc_before) AS added,
       (SELECT count(*) FROM (SELECT * FROM cscp.document EXCEPT SELECT * FROM doc_before) x) AS changed;

-- Where the body checks of POST (in C) meet those in SQL: what passes, what is refused, and by
-- which check, as the PL/pgSQL endpoint answered.
SELECT label, (r).status, (r).headers ->> 'Location' AS location, (r).body ->> 'documentKey' AS document_key,
       (r).body -> 'error' ->> 'sqlstate' AS sqlstate, (r).body -> 'error' ->> 'message' AS message
  FROM (VALUES
    ('ttl 60.0', 'application/json', '{"ttlSeconds": 60.0, "payload": {"a": 1}}'),
    ('ttl 1e2', 'application/json', '{"ttlSeconds": 1e2, "payload": {"a": 1}}'),
    ('ttl -0', 'application/json', '{"ttlSeconds": -0, "payload": {"a": 1}}'),
    ('ttl 3e9', 'application/json', '{"ttlSeconds": 3000000000, "payload": {"a": 1}}'),
    ('charset', 'Application/JSON; charset=utf-8', '{"ttlSeconds": 60, "payload": {"a": 1}}'),
    ('spaces', E' \tapplication/json \n', '{"ttlSeconds": 60, "payload": {"a": 1}}'),
    ('jsonx', 'application/jsonx', '{"ttlSeconds": 60, "payload": {"a": 1}}'),
    ('payload scalar', 'application/json', '{"ttlSeconds": 60, "payload": 5}'),
    ('too deep', 'application/json', '{"ttlSeconds": 60, "payload": ' || repeat('[', 100000) || '}'),
    ('nul in a key', 'application/json', '{"ttlSeconds": 60, "payload": {"\u0000": 1}}')
  ) AS t(label, ctype, body),
  LATERAL (SELECT cscp.http_doc_put('Bearer ' || :'k1', 'shapes:1/é', 'x%y', t.ctype, t.body) AS r) x;
SELECT payload FROM cscp.document WHERE tenant_id = 'gw1' AND session_id = 'shapes:1/é';
DELETE FROM cscp.document WHERE tenant_id = 'gw1' AND session_id = 'shapes:1/é';

-- Last use is recorded, at most once a minute.
SELECT label, last_used_at FROM cscp.api_key WHERE label IN ('profile-bot', 'writer') ORDER BY label;
SET cscp.clock = '2026-05-01 12:10:30+00';
SELECT status FROM cscp.http_doc_get('Bearer ' || :'k1', 'session-abc-456', 'profile');
SELECT label, last_used_at FROM cscp.api_key WHERE label = 'profile-bot';
SET cscp.clock = '2026-05-01 12:11:00+00';
SELECT status FROM cscp.http_doc_get('Bearer ' || :'k1', 'session-abc-456', 'profile');
SELECT label, last_used_at FROM cscp.api_key WHERE label = 'profile-bot';

-- Key management: bad input refused with its SQLSTATE, nothing written.
SELECT label, try(sql) AS result FROM (VALUES
    ('null tenant', $$SELECT cscp.api_key_create(NULL, 'x')$$),
    ('tenant *', $$SELECT cscp.api_key_create('*', 'x')$$),
    ('empty label', $$SELECT cscp.api_key_create('gw1', '')$$),
    ('empty scopes', $$SELECT cscp.api_key_create('gw1', 'x', '{}')$$),
    ('unknown scope', $$SELECT cscp.api_key_create('gw1', 'x', ARRAY['documents:read', 'admin'])$$),
    ('null scope', $$SELECT cscp.api_key_create('gw1', 'x', ARRAY[NULL]::text[])$$),
    ('expiry past', $$SELECT cscp.api_key_create('gw1', 'x', NULL, '2026-05-01 12:00:00+00')$$),
    ('label taken', $$SELECT cscp.api_key_create('gw1', 'profile-bot')$$),
    ('revoke unknown', $$SELECT cscp.api_key_revoke('gw1', 'nobody')$$),
    ('revoke null', $$SELECT cscp.api_key_revoke('gw1', NULL)$$),
    ('direct: bad hash', $$INSERT INTO cscp.api_key (tenant_id, label, key_hash) VALUES ('gw1', 'x', '\x00')$$),
    ('direct: bad scope', $$INSERT INTO cscp.api_key (tenant_id, label, key_hash, scopes)
                           VALUES ('gw1', 'x', sha256('x'), '{root}')$$)) AS b(label, sql);
SELECT count(*) AS keys FROM cscp.api_key;
-- A revoked (or expired) label is taken over by a new key; the old key stays dead.
SELECT cscp.api_key_create('gw1', 'reader') AS kread_new \gset
SELECT status FROM cscp.http_doc_get('Bearer ' || :'kread_new', 'session-abc-456', 'profile');
SELECT status FROM cscp.http_doc_get('Bearer ' || :'kread_old', 'session-abc-456', 'profile');

-- The tenant is bound for the call only: the caller's setting is back afterwards, also after
-- an error answered inside the call.
SET cscp.tenant_id = 'gw2';
SELECT status FROM cscp.http_doc_get('Bearer ' || :'k1', 'session-abc-456', 'profile');
SELECT status FROM cscp.http_doc_put('Bearer ' || :'k1', 's', 'n', 'application/json', '{"ttlSeconds": 0, "payload": {}}');
SELECT current_setting('cscp.tenant_id') AS tenant_after;
RESET cscp.tenant_id;

-- The gateway's role: the http_* functions and nothing else.
CREATE ROLE regress_gw_gateway LOGIN;
SELECT cscp.grant_gateway('regress_gw_gateway');
SELECT try($$SELECT cscp.grant_gateway(current_user)$$) AS superuser_refused;
SELECT try($$SELECT cscp.grant_gateway('no_such_role')$$) AS unknown_role;
SELECT p.oid::regprocedure AS executable
  FROM pg_proc p WHERE p.pronamespace = 'cscp'::regnamespace
   AND has_function_privilege('regress_gw_gateway', p.oid, 'EXECUTE') ORDER BY p.oid::regprocedure::text;
SET ROLE regress_gw_gateway;
SELECT status, body FROM cscp.http_doc_get('Bearer ' || :'k1', 'session-abc-456', 'profile');
SELECT status FROM cscp.http_doc_put('Bearer ' || :'k1', 'session-gw', 'ns', 'application/json',
    '{"ttlSeconds": 60, "payload": {"via": "gateway"}}');
SELECT label, try(sql) AS result FROM (VALUES
    ('read documents', $$SELECT * FROM cscp.document$$),
    ('read keys', $$SELECT * FROM cscp.api_key$$),
    ('doc_get', $$SELECT cscp.doc_get('gw1', 'session-abc-456', 'profile')$$),
    ('doc_put', $$SELECT cscp.doc_put('gw1', 'x', 'y', '{}', 60)$$),
    ('create a key', $$SELECT cscp.api_key_create('gw1', 'mine')$$),
    ('auth helper', $$SELECT * FROM cscp._http_auth('Bearer x', 'documents:read')$$),
    ('tenant setting', $$SET cscp.tenant_id = 'gw1'; SELECT count(*) FROM cscp.document$$)) AS b(label, sql);
RESET ROLE;

-- An application role of one tenant: keys are administration (no rights on cscp.api_key,
-- cscp.grant_gateway revoked); its session's tenant is untouched by a call with a key.
CREATE ROLE regress_gw_app;
SELECT cscp.grant_app('regress_gw_app');
SET ROLE regress_gw_app;
SET cscp.tenant_id = 'gw1';
SELECT label, try(sql) AS result FROM (VALUES
    ('create a key', $$SELECT cscp.api_key_create('gw1', 'app-key')$$),
    ('revoke a key', $$SELECT cscp.api_key_revoke('gw1', 'profile-bot')$$),
    ('read keys', $$SELECT * FROM cscp.api_key$$),
    ('insert a key', $$INSERT INTO cscp.api_key (tenant_id, label, key_hash) VALUES ('gw1', 'x', sha256('x'))$$),
    ('grant_gateway', $$SELECT cscp.grant_gateway('regress_gw_app')$$),
    ('other tenant list', $$SELECT * FROM cscp.doc_list('gw2', 'session-abc-456')$$)) AS b(label, sql);
SELECT * FROM cscp.doc_list('gw1', 'session-abc-456');
-- The gateway's endpoints are not the application's: a key of another tenant passed to them
-- would act for that tenant whatever tenants the role is bound to.
SELECT try(format('SELECT status FROM cscp.http_doc_get(%L, %L, %L)', 'Bearer ' || :'k2',
                  'session-abc-456', 'profile')) AS app_calls_an_endpoint;
SELECT current_setting('cscp.tenant_id') AS tenant_after;
RESET cscp.tenant_id;
RESET ROLE;

DROP OWNED BY regress_gw_gateway, regress_gw_app;
DROP ROLE regress_gw_gateway, regress_gw_app;
DELETE FROM cscp.document WHERE tenant_id IN ('gw1', 'gw2');
DELETE FROM cscp.api_key;
RESET cscp.clock;
