\i sql/include/helpers.sql
-- Bad input to the command functions (command_submit, command_transition, command_recover,
-- command_status, confirm, approve, evidence_verify, canonical_json, canonical_hash): an ERROR
-- with the SQLSTATE of DESIGN.md section 10, and no row of cscp.command, cscp.evidence,
-- cscp.answer, cscp.context or cscp.frame changed.
SET timezone = 'UTC';
\set SHOW_CONTEXT never
SET cscp.clock = '2026-07-01 10:00:00+00';
SELECT context_id AS ctx FROM cscp.context_open('t', 'bic', 'actor') \gset
SELECT command_id AS cmd, state FROM cscp.command_submit('t', 'bic', 'actor', 'bic-1', 'pay', true, '{m1}',
                                                         '{"amount": 1}', 'fp-1') \gset
SELECT :'state' AS state;
-- A command of another conversation, for approve.
SELECT (cscp.context_open('t', 'bic-other', 'actor')).status;
SELECT command_id AS cmd_other FROM cscp.command_submit('t', 'bic-other', 'actor', 'bic-2', 'balance', false,
                                                        '{m1}') \gset
\set unknown 00000000-0000-4000-8000-000000000000
\set long_ascii 'repeat(''x'', 257)'
\set long_utf8 'repeat(''é'', 129)'

SELECT snap();
SELECT label, try(sql) AS result FROM (VALUES
    ('submit: null tenant',            $$SELECT cscp.command_submit(NULL, 'bic', 'actor', 'k', 'pay', true, '{m1}')$$),
    ('submit: empty tenant',           $$SELECT cscp.command_submit('', 'bic', 'actor', 'k', 'pay', true, '{m1}')$$),
    ('submit: reserved tenant',        $$SELECT cscp.command_submit('*', 'bic', 'actor', 'k', 'pay', true, '{m1}')$$),
    ('submit: long tenant',            format('SELECT cscp.command_submit(%L, %L, %L, %L, %L, true, %L)', :long_ascii, 'bic', 'actor', 'k', 'pay', '{m1}')),
    ('submit: null conversation',      $$SELECT cscp.command_submit('t', NULL, 'actor', 'k', 'pay', true, '{m1}')$$),
    ('submit: empty conversation',     $$SELECT cscp.command_submit('t', '', 'actor', 'k', 'pay', true, '{m1}')$$),
    ('submit: long conversation',      format('SELECT cscp.command_submit(%L, %L, %L, %L, %L, true, %L)', 't', :long_utf8, 'actor', 'k', 'pay', '{m1}')),
    ('submit: null actor',             $$SELECT cscp.command_submit('t', 'bic', NULL, 'k', 'pay', true, '{m1}')$$),
    ('submit: empty actor',            $$SELECT cscp.command_submit('t', 'bic', '', 'k', 'pay', true, '{m1}')$$),
    ('submit: long actor',             format('SELECT cscp.command_submit(%L, %L, %L, %L, %L, true, %L)', 't', 'bic', :long_ascii, 'k', 'pay', '{m1}')),
    ('submit: null key',               $$SELECT cscp.command_submit('t', 'bic', 'actor', NULL, 'pay', true, '{m1}')$$),
    ('submit: empty key',              $$SELECT cscp.command_submit('t', 'bic', 'actor', '', 'pay', true, '{m1}')$$),
    ('submit: long key',               format('SELECT cscp.command_submit(%L, %L, %L, %L, %L, true, %L)', 't', 'bic', 'actor', :long_utf8, 'pay', '{m1}')),
    ('submit: null command name',      $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', NULL, true, '{m1}')$$),
    ('submit: empty command name',     $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', '', true, '{m1}')$$),
    ('submit: long command name',      format('SELECT cscp.command_submit(%L, %L, %L, %L, %L, true, %L)', 't', 'bic', 'actor', 'k', :long_ascii, '{m1}')),
    ('submit: null mutating',          $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', 'pay', NULL, '{m1}')$$),
    ('submit: null message_ids',       $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', 'pay', true, NULL)$$),
    ('submit: empty message id',       $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', 'pay', true, '{m1,""}')$$),
    ('submit: null message id',        $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', 'pay', true, ARRAY['m1', NULL])$$),
    ('submit: long message id',        format('SELECT cscp.command_submit(%L, %L, %L, %L, %L, true, ARRAY[%L])', 't', 'bic', 'actor', 'k', 'pay', :long_ascii)),
    ('submit: 2-D message_ids',        $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', 'pay', true, '{{m1},{m2}}')$$),
    ('submit: null payload',           $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', 'pay', true, '{m1}', NULL)$$),
    ('submit: array payload',          $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', 'pay', true, '{m1}', '[1]')$$),
    ('submit: number payload',         $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', 'pay', true, '{m1}', '1')$$),
    ('submit: string payload',         $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', 'pay', true, '{m1}', '"x"')$$),
    ('submit: JSON null payload',      $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', 'pay', true, '{m1}', 'null')$$),
    ('submit: empty fingerprint',      $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', 'pay', true, '{m1}', '{}', '')$$),
    ('submit: long fingerprint',       format('SELECT cscp.command_submit(%L, %L, %L, %L, %L, true, %L, %L, %L)', 't', 'bic', 'actor', 'k', 'pay', '{m1}', '{}', :long_ascii)),
    ('submit: key reused, payload',    $$SELECT cscp.command_submit('t', 'bic', 'actor', 'bic-1', 'pay', true, '{m1}', '{"amount": 2}', 'fp-1')$$),
    ('submit: key reused, name',       $$SELECT cscp.command_submit('t', 'bic', 'actor', 'bic-1', 'refund', true, '{m1}', '{"amount": 1}', 'fp-1')$$),
    ('submit: key reused, conv',       $$SELECT cscp.command_submit('t', 'bic-other', 'actor', 'bic-1', 'pay', true, '{m1}', '{"amount": 1}', 'fp-1')$$),
    ('submit: key reused, target',     $$SELECT cscp.command_submit('t', 'bic', 'actor', 'bic-1', 'pay', true, '{m1}', '{"amount": 1}', 'fp-2')$$),
    ('transition: null id',            $$SELECT cscp.command_transition(NULL, 'canceled')$$),
    ('transition: unknown id',         format('SELECT cscp.command_transition(%L, %L)', :'unknown', 'canceled')),
    ('transition: unknown, failed', format('SELECT cscp.command_transition(%L, %L)', :'unknown', 'failed')),
    ('transition: null state',         format('SELECT cscp.command_transition(%L, NULL)', :'cmd')),
    ('transition: unknown state',      format('SELECT cscp.command_transition(%L, %L)', :'cmd', 'nope')),
    ('transition: state by case',      format('SELECT cscp.command_transition(%L, %L)', :'cmd', 'Canceled')),
    ('transition: empty reason',       format('SELECT cscp.command_transition(%L, %L, %L)', :'cmd', 'canceled', '')),
    ('transition: long reason',        format('SELECT cscp.command_transition(%L, %L, %L)', :'cmd', 'canceled', :long_ascii)),
    ('transition: array detail',       format('SELECT cscp.command_transition(%L, %L, %L, %L)', :'cmd', 'canceled', 'x', '[1]')),
    ('transition: number detail',      format('SELECT cscp.command_transition(%L, %L, %L, %L)', :'cmd', 'canceled', 'x', '5')),
    ('transition: string detail',      format('SELECT cscp.command_transition(%L, %L, %L, %L)', :'cmd', 'canceled', 'x', '"x"')),
    ('transition: JSON null detail',   format('SELECT cscp.command_transition(%L, %L, %L, %L)', :'cmd', 'canceled', 'x', 'null')),
    ('transition: empty approver',     format('SELECT cscp.command_transition(%L, %L, %L, %L)', :'cmd', 'authz_pending', 'approval_required', '{"approver_id": ""}')),
    ('transition: null approver',      format('SELECT cscp.command_transition(%L, %L, %L, %L)', :'cmd', 'authz_pending', 'approval_required', '{"approver_id": null}')),
    ('transition: long approver',      format('SELECT cscp.command_transition(%L, %L, %L, %L)', :'cmd', 'authz_pending', 'approval_required', jsonb_build_object('approver_id', repeat('x', 257)))),
    ('recover: null target',           $$SELECT cscp.command_recover(NULL, 'cancel', 'k')$$),
    ('recover: unknown target',        format('SELECT cscp.command_recover(%L, %L, %L)', :'unknown', 'cancel', 'k')),
    ('recover: null kind',             format('SELECT cscp.command_recover(%L, NULL, %L)', :'cmd', 'k')),
    ('recover: empty kind',            format('SELECT cscp.command_recover(%L, %L, %L)', :'cmd', '', 'k')),
    ('recover: unknown kind',          format('SELECT cscp.command_recover(%L, %L, %L)', :'cmd', 'undo', 'k')),
    ('recover: kind by case',          format('SELECT cscp.command_recover(%L, %L, %L)', :'cmd', 'Cancel', 'k')),
    ('recover: null key',              format('SELECT cscp.command_recover(%L, %L, NULL)', :'cmd', 'cancel')),
    ('recover: empty key',             format('SELECT cscp.command_recover(%L, %L, %L)', :'cmd', 'cancel', '')),
    ('recover: long key',              format('SELECT cscp.command_recover(%L, %L, %L)', :'cmd', 'cancel', :long_utf8)),
    ('recover: null payload',          format('SELECT cscp.command_recover(%L, %L, %L, NULL)', :'cmd', 'cancel', 'k')),
    ('recover: array payload',         format('SELECT cscp.command_recover(%L, %L, %L, %L)', :'cmd', 'cancel', 'k', '[]')),
    ('recover: string payload',        format('SELECT cscp.command_recover(%L, %L, %L, %L)', :'cmd', 'cancel', 'k', '"x"')),
    ('recover: key reused',            format('SELECT cscp.command_recover(%L, %L, %L)', :'cmd', 'cancel', 'bic-1')),
    ('status: null id',                $$SELECT cscp.command_status(NULL)$$),
    ('status: unknown id',             format('SELECT cscp.command_status(%L)', :'unknown')),
    ('allowed: unknown state',         $$SELECT cscp.command_transition_allowed('nope', 'started')$$),
    ('confirm: null tenant',           $$SELECT cscp.confirm(NULL, 'bic', 'actor', 'm2', true)$$),
    ('confirm: empty tenant',          $$SELECT cscp.confirm('', 'bic', 'actor', 'm2', true)$$),
    ('confirm: reserved tenant',       $$SELECT cscp.confirm('*', 'bic', 'actor', 'm2', true)$$),
    ('confirm: long tenant',           format('SELECT cscp.confirm(%L, %L, %L, %L, true)', :long_ascii, 'bic', 'actor', 'm2')),
    ('confirm: null conversation',     $$SELECT cscp.confirm('t', NULL, 'actor', 'm2', true)$$),
    ('confirm: empty conversation',    $$SELECT cscp.confirm('t', '', 'actor', 'm2', true)$$),
    ('confirm: long conversation',     format('SELECT cscp.confirm(%L, %L, %L, %L, true)', 't', :long_utf8, 'actor', 'm2')),
    ('confirm: null actor',            $$SELECT cscp.confirm('t', 'bic', NULL, 'm2', true)$$),
    ('confirm: empty actor',           $$SELECT cscp.confirm('t', 'bic', '', 'm2', true)$$),
    ('confirm: long actor',            format('SELECT cscp.confirm(%L, %L, %L, %L, true)', 't', 'bic', :long_ascii, 'm2')),
    ('confirm: null message_id',       $$SELECT cscp.confirm('t', 'bic', 'actor', NULL, true)$$),
    ('confirm: empty message_id',      $$SELECT cscp.confirm('t', 'bic', 'actor', '', true)$$),
    ('confirm: long message_id',       format('SELECT cscp.confirm(%L, %L, %L, %L, true)', 't', 'bic', 'actor', :long_ascii)),
    ('confirm: null answer',           $$SELECT cscp.confirm('t', 'bic', 'actor', 'm2', NULL)$$),
    ('confirm: empty fingerprint',     $$SELECT cscp.confirm('t', 'bic', 'actor', 'm2', true, '')$$),
    ('confirm: long fingerprint',      format('SELECT cscp.confirm(%L, %L, %L, %L, true, %L)', 't', 'bic', 'actor', 'm2', :long_ascii)),
    ('approve: null tenant',           $$SELECT cscp.approve(NULL, 'bic', 'mgr-1', 'a1', true)$$),
    ('approve: empty tenant',          $$SELECT cscp.approve('', 'bic', 'mgr-1', 'a1', true)$$),
    ('approve: reserved tenant',       $$SELECT cscp.approve('*', 'bic', 'mgr-1', 'a1', true)$$),
    ('approve: long tenant',           format('SELECT cscp.approve(%L, %L, %L, %L, true)', :long_ascii, 'bic', 'mgr-1', 'a1')),
    ('approve: null conversation',     $$SELECT cscp.approve('t', NULL, 'mgr-1', 'a1', true)$$),
    ('approve: empty conversation',    $$SELECT cscp.approve('t', '', 'mgr-1', 'a1', true)$$),
    ('approve: long conversation',     format('SELECT cscp.approve(%L, %L, %L, %L, true)', 't', :long_utf8, 'mgr-1', 'a1')),
    ('approve: null approver',         $$SELECT cscp.approve('t', 'bic', NULL, 'a1', true)$$),
    ('approve: empty approver',        $$SELECT cscp.approve('t', 'bic', '', 'a1', true)$$),
    ('approve: long approver',         format('SELECT cscp.approve(%L, %L, %L, %L, true)', 't', 'bic', :long_ascii, 'a1')),
    ('approve: null message_id',       $$SELECT cscp.approve('t', 'bic', 'mgr-1', NULL, true)$$),
    ('approve: empty message_id',      $$SELECT cscp.approve('t', 'bic', 'mgr-1', '', true)$$),
    ('approve: long message_id',       format('SELECT cscp.approve(%L, %L, %L, %L, true)', 't', 'bic', 'mgr-1', :long_utf8)),
    ('approve: null decision',         $$SELECT cscp.approve('t', 'bic', 'mgr-1', 'a1', NULL)$$),
    ('approve: unknown command',       format('SELECT cscp.approve(%L, %L, %L, %L, true, %L)', 't', 'bic', 'mgr-1', 'a1', :'unknown')),
    ('approve: other conversation''s', format('SELECT cscp.approve(%L, %L, %L, %L, true, %L)', 't', 'bic', 'mgr-1', 'a1', :'cmd_other')),
    ('verify: null tenant',            $$SELECT cscp.evidence_verify(NULL)$$),
    ('verify: empty tenant',           $$SELECT cscp.evidence_verify('')$$),
    ('verify: reserved tenant',        $$SELECT cscp.evidence_verify('*')$$),
    ('verify: long tenant',            format('SELECT cscp.evidence_verify(%L)', :long_ascii)),
    ('verify: unknown command',        format('SELECT cscp.evidence_verify(%L, %L)', 't', :'unknown'))
    ) AS b(label, sql);
SELECT changes();

-- The command and its context are as they were: pending confirmation, one frame, two evidence rows.
SELECT * FROM cmd_rows('bic');
SELECT * FROM ctx_rows('bic');
SELECT key, seq, event_type FROM ev_rows('bic');

-- canonical_json and canonical_hash take any jsonb; like PostgreSQL's own strict functions they
-- answer NULL to NULL.  The typed enum input refuses an unknown state before any function runs.
SELECT cscp.canonical_json(NULL) IS NULL AS json_of_null, cscp.canonical_hash(NULL) IS NULL AS hash_of_null,
       cscp.command_transition_allowed(NULL, 'started') IS NULL AS allowed_of_null;
SELECT try($$SELECT 'nope'::cscp.command_state$$) AS cast_unknown_state;

-- Ids of exactly 256 bytes are accepted (here a fingerprint that does not match: target_mismatch).
SELECT outcome FROM cscp.confirm('t', 'bic', 'actor', repeat('m', 256), true, repeat('é', 128));

-- What a user sees: message, detail and hint.
\set VERBOSITY default
SELECT cscp.command_submit('t', 'bic', 'actor', '', 'pay', true, '{m1}');
SELECT cscp.command_submit('t', 'bic', 'actor', 'k', 'pay', true, '{m1}', '[1]');
SELECT cscp.command_recover(:'cmd', 'undo', 'k');
SELECT cscp.confirm('t', 'bic', 'actor', 'm2', NULL);
\set VERBOSITY terse

------------------------------------------------------------------------------------------------
-- Another tenant's commands: an application role acting for tenant 'other' cannot see tenant
-- 't''s command (it "does not exist"), nor act for tenant 't' (42501).
CREATE ROLE regress_cscp_other;
SELECT cscp.grant_app('regress_cscp_other');
SELECT snap();
SET ROLE regress_cscp_other;
SET cscp.tenant_id = 'other';
SELECT label, try(sql) AS result FROM (VALUES
    ('status of t''s command',         format('SELECT cscp.command_status(%L)', :'cmd')),
    ('transition of t''s command',     format('SELECT cscp.command_transition(%L, %L)', :'cmd', 'canceled')),
    ('failed: t''s command',          format('SELECT cscp.command_transition(%L, %L)', :'cmd', 'failed')),
    ('recover t''s command',           format('SELECT cscp.command_recover(%L, %L, %L)', :'cmd', 'cancel', 'k-other')),
    ('approve t''s command',           format('SELECT cscp.approve(%L, %L, %L, %L, true, %L)', 'other', 'bic', 'mgr-1', 'a1', :'cmd')),
    ('verify t''s command',            format('SELECT cscp.evidence_verify(%L, %L)', 'other', :'cmd')),
    ('submit for t',                   $$SELECT cscp.command_submit('t', 'bic', 'actor', 'k', 'pay', true, '{m1}')$$),
    ('confirm for t',                  $$SELECT cscp.confirm('t', 'bic', 'actor', 'm2', true)$$),
    ('approve for t',                  $$SELECT cscp.approve('t', 'bic', 'mgr-1', 'a1', true)$$),
    ('verify for t',                   $$SELECT cscp.evidence_verify('t')$$),
    ('write evidence',                 $$INSERT INTO cscp.evidence (tenant_id, conversation_id, seq, stage, event_type, created_at, hash) VALUES ('other', 'c', 1, 's', 'e', now(), 'h')$$)
    ) AS b(label, sql);
SELECT (SELECT count(*) FROM cscp.command) AS commands_visible, (SELECT count(*) FROM cscp.evidence) AS evidence_visible,
       (SELECT count(*) FROM cscp.answer) AS answers_visible;
-- Without a tenant named, the role acts for none (fail closed).
RESET cscp.tenant_id;
SELECT try($$SELECT cscp.command_submit('other', 'bic', 'actor', 'k', 'pay', true, '{m1}')$$) AS no_tenant_set;
RESET ROLE;
SELECT changes();
SELECT state FROM cscp.command_status(:'cmd');
DROP OWNED BY regress_cscp_other;
DROP ROLE regress_cscp_other;

-- Leave nothing waiting.
SELECT outcome FROM cscp.confirm('t', 'bic', 'actor', 'm-last', false);
RESET cscp.clock;
