-- "Context usable" in SQL: cscp.context_usable(status, expires_at, as_of) is true for a live
-- status (active, pending, blocked) with expires_at later than as_of, and false otherwise; the
-- planner inlines it (no call of it is left in a plan), for the application role too; and the
-- readers that use it (cscp.context_get's effective status, the gateway's slot endpoint, the
-- operators' view) treat a live context past its expiry as expired.
BEGIN;
SELECT plan(11);

SELECT is((SELECT array_agg(s::text || ':' || d::text || ':' ||
                            cscp.context_usable(s, '2026-08-01 10:00:00+00'::timestamptz + d * interval '1 second',
                                                '2026-08-01 10:00:00+00')::text
                            ORDER BY s, d)
             FROM unnest(enum_range(NULL::cscp.context_status)) s, generate_series(-1, 1) d),
          ARRAY['active:-1:false', 'active:0:false', 'active:1:true',
                'pending:-1:false', 'pending:0:false', 'pending:1:true',
                'blocked:-1:false', 'blocked:0:false', 'blocked:1:true',
                'expired:-1:false', 'expired:0:false', 'expired:1:false',
                'closed:-1:false', 'closed:0:false', 'closed:1:false'],
          'usable: a live status and an expiry later than the time given, not at it');
SELECT is(cscp.context_usable(NULL, now() + interval '1 hour', now()) IS TRUE, false, 'no status: not usable');
SELECT is(cscp.context_usable('active', NULL, now()) IS TRUE, false, 'no expiry: not usable');

CREATE FUNCTION pg_temp.plan_text(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text; t text := '';
BEGIN
    FOR r IN EXECUTE 'EXPLAIN (VERBOSE, COSTS OFF) ' || q LOOP t := t || r || E'\n'; END LOOP;
    RETURN t;
END $$;
SELECT unalike(pg_temp.plan_text($$SELECT x.context_id FROM cscp.context x
                                   WHERE cscp.context_usable(x.status, x.expires_at, cscp.now())$$),
              '%context_usable%', 'the planner inlines it: no call of it left in the plan');

CREATE ROLE tap_cu_app;
SELECT cscp.grant_app('tap_cu_app', ARRAY['cu']);
SET ROLE tap_cu_app;
SET cscp.tenant_id = 'cu';
SELECT unalike(pg_temp.plan_text($$SELECT x.context_id FROM cscp.context x
                                   WHERE cscp.context_usable(x.status, x.expires_at, cscp.now())$$),
              '%context_usable%', 'inlined for the application role too');
RESET ROLE;

SET cscp.clock = '2026-08-01 10:00:00+00';
SET ROLE tap_cu_app;
SELECT is((cscp.context_open('cu', 'conv', 'user', ttl => interval '10 minutes')).status::text, 'active', 'a context opened');
SELECT is((SELECT c.status::text FROM cscp.context_get('cu', 'conv', 'user') c), 'active', 'context_get: usable before its expiry');
RESET ROLE;
SET cscp.clock = '2026-08-01 10:10:00+00';
SET ROLE tap_cu_app;
SELECT is((SELECT c.status::text FROM cscp.context_get('cu', 'conv', 'user') c), 'expired',
          'context_get: expired at its expiry, though the row still says active');
SELECT is((SELECT x.status::text FROM cscp.context x WHERE x.tenant_id = 'cu'), 'active', 'the row itself is unchanged');
RESET ROLE;
SELECT is((cscp._http_slot('cu', 'conv', 'user', 'active_intent', '"x"')).status, 404,
          'the gateway''s slot endpoint: no usable context, 404');
SELECT is((SELECT a.status::text FROM cscp._active_context a WHERE a.tenant_id = 'cu'), 'expired',
          'the operators'' view shows it expired');

SELECT * FROM finish();
ROLLBACK;
