-- Operators see what may come next (SMCL X): cscp.command_lifecycle gives each command's
-- next_allowed steps and recovery_options, as cscp.command_status gives them to the application,
-- at every detail level.
BEGIN;
SELECT plan(6);

CREATE ROLE tap_os_app;
CREATE ROLE tap_os_ops;
SELECT cscp.grant_app('tap_os_app', ARRAY['os']);
SELECT cscp.grant_operator('tap_os_ops', ARRAY['os']);
SET cscp.clock = '2026-10-02 10:00:00+00';
SET ROLE tap_os_app;
SET cscp.tenant_id = 'os';
SELECT (cscp.context_open('os', 'c1', 'u')).status;
SELECT command_id AS k1 FROM cscp.command_submit('os', 'c1', 'u', 'k1', 'transfer', true, '{m1}') \gset
SELECT cscp.confirm('os', 'c1', 'u', 'm2', true);
SELECT count(*) FROM (SELECT cscp.command_transition(:'k1', s::cscp.command_state)
                        FROM unnest(ARRAY['authz_pending', 'authorized', 'started', 'executed']) s) t;
SELECT command_id AS k2 FROM cscp.command_submit('os', 'c1', 'u', 'k2', 'transfer', true, '{m3}') \gset
CREATE TEMP TABLE app_view AS
    SELECT s.next_allowed, s.recovery_options, x.id
      FROM unnest(ARRAY[:'k1', :'k2']::uuid[]) x(id), cscp.command_status(x.id) s;
RESET ROLE;
GRANT SELECT ON app_view TO tap_os_ops;

SET ROLE tap_os_ops;
RESET cscp.tenant_id;
SELECT is((SELECT recovery_options FROM cscp.command_lifecycle WHERE command_id = :'k1'),
          ARRAY['compensate'], 'an executed command offers its compensation');
SELECT is((SELECT next_allowed FROM cscp.command_lifecycle WHERE command_id = :'k1'),
          '{}'::cscp.command_state[], 'and no step of its own (compensated waits for the compensation)');
SELECT is((SELECT next_allowed FROM cscp.command_lifecycle WHERE command_id = :'k2'),
          ARRAY['confirmed', 'rejected', 'canceled']::cscp.command_state[], 'a waiting command: what may come next');
SELECT is((SELECT recovery_options FROM cscp.command_lifecycle WHERE command_id = :'k2'),
          ARRAY['cancel'], 'and its recovery');
SELECT is((SELECT array_agg(ROW(l.next_allowed, l.recovery_options)::text ORDER BY l.command_id)
             FROM cscp.command_lifecycle l WHERE l.tenant_id = 'os'),
          (SELECT array_agg(ROW(a.next_allowed, a.recovery_options)::text ORDER BY a.id) FROM app_view a),
          'the operator sees what command_status tells the application');
RESET ROLE;
SELECT is(cscp.command_recovery_options('failed'), ARRAY['retry', 'reprocess', 'compensate'],
          'command_recovery_options alone');
SELECT * FROM finish();
ROLLBACK;
