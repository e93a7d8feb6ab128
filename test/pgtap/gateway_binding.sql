-- The gateway's endpoints and their shared helpers (src/sql/gateway.sql): cscp._http_tenant
-- binds cscp.tenant_id to the key's tenant without a SET clause of its own, so the binding is
-- in force while the endpoint's API call runs and ends when the endpoint returns (its own SET
-- clause restores the caller's value, inside the caller's transaction too); cscp._http_caught
-- answers the errors the gateway maps and raises any other again with its SQLSTATE, message,
-- detail and hint.  The helpers are not callable by the gateway's role nor an application's.
BEGIN;
SELECT plan(22);

CREATE ROLE tap_gwb_gateway;
SELECT cscp.grant_gateway('tap_gwb_gateway');
CREATE ROLE tap_gwb_app;
SELECT cscp.grant_app('tap_gwb_app');
SET cscp.clock = '2026-09-01 10:00:00+00';
SELECT cscp.api_key_create('gwb1', 'all') AS k1 \gset
SELECT cscp.api_key_create('gwb2', 'all') AS k2 \gset
SELECT cscp.doc_put('gwb1', 's', 'n', '{"a": 1}', 600) IS NOT NULL;

-- An observer: the cscp.tenant_id in force when the API writes a row (a trigger, as the
-- endpoint's owner).
CREATE TEMP TABLE seen (tbl text, tenant text);
GRANT SELECT ON seen TO PUBLIC;
CREATE FUNCTION pg_temp.note_tenant() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pg_temp.seen VALUES (TG_TABLE_NAME, current_setting('cscp.tenant_id', true));
    RETURN NULL;
END
$$;
CREATE TRIGGER tap_gwb_note AFTER INSERT OR DELETE ON cscp.fact
    FOR EACH ROW EXECUTE FUNCTION pg_temp.note_tenant();
CREATE TRIGGER tap_gwb_note AFTER INSERT OR DELETE ON cscp.context
    FOR EACH ROW EXECUTE FUNCTION pg_temp.note_tenant();
CREATE TRIGGER tap_gwb_note AFTER INSERT OR DELETE ON cscp.document
    FOR EACH ROW EXECUTE FUNCTION pg_temp.note_tenant();

-- An error an endpoint's API call raises, with its fields, or NULL when it returns.
CREATE FUNCTION pg_temp.raised(sql text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    d text;
    h text;
BEGIN
    EXECUTE sql;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RETURN pg_catalog.format('%s|%s|%s|%s', SQLSTATE, SQLERRM, d, h);
END
$$;
GRANT EXECUTE ON FUNCTION pg_temp.raised(text) TO PUBLIC;

---------------------------------------------------------------------------------------------------
-- The gateway's role, its session bound to a tenant of its own choosing.
SET ROLE tap_gwb_gateway;
SET cscp.tenant_id = 'caller';

SELECT is((SELECT status FROM cscp.http_fact_write('Bearer ' || :'k1', 'ana', 'application/json',
                                                    '{"factId": "f1", "key": "k", "value": 1}')), 201,
          'http_fact_write (cscp._http_request) writes the fact');
SELECT is((SELECT array_agg(tenant) FROM seen WHERE tbl = 'fact'), '{gwb1}'::text[],
          'while it ran, cscp.tenant_id was the key''s tenant');
SELECT is(current_setting('cscp.tenant_id'), 'caller', 'after it returned, the caller''s tenant is back');

SELECT is((SELECT status FROM cscp.http_context_open('Bearer ' || :'k2', 'c1', 'u1', NULL, NULL)), 200,
          'http_context_open (an optional body) opens a context');
SELECT is((SELECT array_agg(tenant) FROM seen WHERE tbl = 'context'), '{gwb2}'::text[],
          'while it ran, cscp.tenant_id was that key''s tenant');
SELECT is(current_setting('cscp.tenant_id'), 'caller', 'after it returned, the caller''s tenant is back');

SELECT is((SELECT status FROM cscp.http_doc_delete('Bearer ' || :'k1', 's', 'n')), 204,
          'http_doc_delete (cscp._http_tenant, no body) deletes the document');
SELECT is((SELECT array_agg(tenant) FROM seen WHERE tbl = 'document'), '{gwb1}'::text[],
          'while it ran, cscp.tenant_id was the key''s tenant');
SELECT is(current_setting('cscp.tenant_id'), 'caller', 'after it returned, the caller''s tenant is back');

SELECT is((SELECT status FROM cscp.http_fact_write('Bearer ' || :'k1', 'ana', 'application/json', '{"key": 1}')),
          400, 'a refused body answers 400');
SELECT is(current_setting('cscp.tenant_id'), 'caller', 'and leaves the caller''s tenant as it was');

-- The helpers are the endpoints' own.
SELECT throws_ok($$SELECT * FROM cscp._http_tenant('Bearer x', 'facts:read')$$, '42501', NULL,
                 'the gateway''s role cannot bind a tenant through cscp._http_tenant');
SELECT throws_ok($$SELECT * FROM cscp._http_request('Bearer x', 'facts:read', 'application/json', '{}', NULL)$$,
                 '42501', NULL, 'nor call cscp._http_request');
SELECT throws_ok($$SELECT cscp._http_caught('22023', 'm', NULL, NULL)$$, '42501', NULL,
                 'nor cscp._http_caught');
RESET cscp.tenant_id;
RESET ROLE;

SET ROLE tap_gwb_app;
SET cscp.tenant_id = 'gwb1';
SELECT throws_ok($$SELECT * FROM cscp._http_tenant('Bearer ' || 'x', 'facts:read')$$, '42501', NULL,
                 'an application role cannot call cscp._http_tenant');
SELECT throws_ok($$SELECT cscp.http_fact_current('Bearer x', 'ana', 'f1')$$, '42501', NULL,
                 'nor an endpoint');
SELECT is(current_setting('cscp.tenant_id'), 'gwb1', 'its tenant is its own');
RESET cscp.tenant_id;
RESET ROLE;

---------------------------------------------------------------------------------------------------
-- Errors of the API call: mapped ones answered, any other raised again as it was.
CREATE FUNCTION pg_temp.refuse() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.key = 'busy' THEN
        RAISE EXCEPTION 'the row is busy' USING ERRCODE = '55000', DETAIL = 'Someone has it.';
    ELSIF NEW.key = 'both' THEN
        RAISE EXCEPTION 'observer refuses' USING ERRCODE = 'P0001', DETAIL = 'A detail.', HINT = 'A hint.';
    ELSIF NEW.key = 'detail' THEN
        RAISE EXCEPTION 'observer refuses' USING ERRCODE = 'XX001', DETAIL = 'A detail.';
    ELSIF NEW.key = 'hint' THEN
        RAISE EXCEPTION 'observer refuses' USING ERRCODE = 'P0003', HINT = 'A hint.';
    ELSIF NEW.key = 'bare' THEN
        RAISE EXCEPTION 'observer refuses' USING ERRCODE = '42P01';
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER tap_gwb_refuse BEFORE INSERT ON cscp.fact
    FOR EACH ROW EXECUTE FUNCTION pg_temp.refuse();

SET ROLE tap_gwb_gateway;
SELECT is((SELECT row(status, body -> 'error')::text
             FROM cscp.http_fact_write('Bearer ' || :'k1', 'ana', 'application/json', '{"key": "busy", "value": 1}')),
          '(409,"{""code"": ""conflict"", ""detail"": ""Someone has it."", ""message"": ""the row is busy"", ""sqlstate"": ""55000""}")',
          'a mapped error is answered (409) with its message and detail');
SELECT is(pg_temp.raised(format('SELECT cscp.http_fact_write(%L, %L, %L, %L)', 'Bearer ' || :'k1', 'ana',
                                'application/json', '{"key": "both", "value": 1}')),
          'P0001|observer refuses|A detail.|A hint.',
          'any other is raised again with its SQLSTATE, message, detail and hint');
SELECT is(pg_temp.raised(format('SELECT cscp.http_fact_write(%L, %L, %L, %L)', 'Bearer ' || :'k1', 'ana',
                                'application/json', '{"key": "detail", "value": 1}')),
          'XX001|observer refuses|A detail.|', 'one with a detail and no hint');
SELECT is(pg_temp.raised(format('SELECT cscp.http_fact_write(%L, %L, %L, %L)', 'Bearer ' || :'k1', 'ana',
                                'application/json', '{"key": "hint", "value": 1}')),
          'P0003|observer refuses||A hint.', 'one with a hint and no detail');
SELECT is(pg_temp.raised(format('SELECT cscp.http_fact_write(%L, %L, %L, %L)', 'Bearer ' || :'k1', 'ana',
                                'application/json', '{"key": "bare", "value": 1}')),
          '42P01|observer refuses||', 'one with neither');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
