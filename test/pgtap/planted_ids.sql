-- Planted ids: ids are keyed per tenant, so tenant A may insert into its own rows a command and
-- a context carrying the ids of tenant B's.  Every lookup by id alone (command_status,
-- command_transition, command_recover, slot_set, context_transition) is held to the session's
-- tenant, for an application role (row-level security) and for a role it does not bind (the
-- owner behind the gateway, through cscp.tenant_id): each tenant reaches its own row only, an
-- id of another tenant's answers as an absent one (22023, 404 over the gateway), and B's own
-- calls keep working, in SQL and through the gateway's functions.
BEGIN;
SELECT plan(36);

SET cscp.clock = '2026-08-01 10:00:00+00';
CREATE ROLE tap_plant_a;
CREATE ROLE tap_plant_b;
SELECT cscp.grant_app('tap_plant_a', ARRAY['plant_a']);
SELECT cscp.grant_app('tap_plant_b', ARRAY['plant_b']);
SELECT cscp.api_key_create('plant_a', 'a') AS ka \gset
SELECT cscp.api_key_create('plant_b', 'b') AS kb \gset

-- B's context and two read-only commands (canonicalized).
SELECT cscp.command_declare('plant_b', 'lookup', false) IS NOT NULL AS declared \gset
SELECT context_id AS b_ctx FROM cscp.context_open('plant_b', 'conv', 'user', '{"active_intent": "pay"}') \gset
SELECT command_id AS b_cmd FROM cscp.command_submit('plant_b', 'conv', 'user', 'k1', 'lookup', false, ARRAY['m1']) \gset
SELECT command_id AS b_only FROM cscp.command_submit('plant_b', 'conv', 'user', 'k2', 'lookup', false, ARRAY['m2']) \gset

-- A plants them: a context with B's context id, a command with B's command id.
SET ROLE tap_plant_a;
SET cscp.tenant_id = 'plant_a';
SELECT lives_ok(format($$INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
                         VALUES ('plant_a', %L, 'conv', 'planter', cscp.now() + interval '1 hour', interval '1 hour')$$,
                       :'b_ctx'), 'A inserts a context carrying B''s context id');
SELECT lives_ok(format($$INSERT INTO cscp.command (tenant_id, command_id, idempotency_key, conversation_id, actor_id,
                                                   command_name, mutating)
                         VALUES ('plant_a', %L, 'planted', 'conv', 'planter', 'pay', true)$$, :'b_cmd'),
                'A inserts a command carrying B''s command id');

-- A, bound to its tenant: its own planted rows, never B's.
SELECT is((SELECT state FROM cscp.command_status(:'b_cmd')), 'received'::cscp.command_state,
          'A: command_status of the planted id reads A''s own command');
SELECT throws_ok(format('SELECT * FROM cscp.command_status(%L)', :'b_only'), '22023',
                 format('command %s does not exist', :'b_only'), 'A: command_status of B''s id: no such command');
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', :'b_only', 'canceled'), '22023',
                 format('command %s does not exist', :'b_only'), 'A: command_transition of B''s id: no such command');
SELECT throws_ok(format('SELECT * FROM cscp.command_recover(%L, %L, %L)', :'b_only', 'cancel', 'r1'), '22023',
                 format('command %s does not exist', :'b_only'), 'A: command_recover of B''s id: no such command');
SELECT is((SELECT state FROM cscp.command_transition(:'b_cmd', 'canceled')), 'received'::cscp.command_state,
          'A: command_transition of the planted id is judged on A''s own command (received, refused)');
SELECT is((SELECT slots ->> 'x_mark' FROM cscp.slot_set(:'b_ctx', 'x_mark', '"a"')), 'a',
          'A: slot_set of the planted context id writes A''s own context');
SELECT is((SELECT status FROM cscp.context_transition(:'b_ctx', 'pending')), 'pending'::cscp.context_status,
          'A: context_transition of the planted context id moves A''s own context');
RESET ROLE;

-- B, bound to its tenant: its own rows, untouched by A's calls, and its calls work.
SET ROLE tap_plant_b;
SET cscp.tenant_id = 'plant_b';
SELECT is((SELECT state FROM cscp.command_status(:'b_cmd')), 'canonicalized'::cscp.command_state,
          'B: its command is as it was, A''s calls did not reach it');
SELECT is((SELECT slots ? 'x_mark' FROM cscp.context WHERE context_id = :'b_ctx'), false,
          'B: its context has no slot of A''s');
SELECT is((SELECT accepted FROM cscp.command_transition(:'b_cmd', 'canceled')), true,
          'B: command_transition of its own command');
SELECT is((SELECT slots ->> 'x_mark' FROM cscp.slot_set(:'b_ctx', 'x_mark', '"b"')), 'b',
          'B: slot_set of its own context');
SELECT is((SELECT replayed FROM cscp.command_recover(:'b_cmd', 'reprocess', 'rp1')), false,
          'B: command_recover of its own command');
RESET ROLE;

-- The owner (row-level security does not bind it): held to cscp.tenant_id when it is set.
SET cscp.tenant_id = 'plant_a';
SELECT is((SELECT state FROM cscp.command_status(:'b_cmd')), 'received'::cscp.command_state,
          'owner acting for A: command_status of the planted id reads A''s command');
SELECT throws_ok(format('SELECT * FROM cscp.command_status(%L)', :'b_only'), '22023',
                 format('command %s does not exist', :'b_only'), 'owner acting for A: B''s id is no command of A''s');
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', :'b_only', 'canceled'), '22023',
                 format('command %s does not exist', :'b_only'), 'owner acting for A: command_transition of B''s id');
SELECT throws_ok(format('SELECT * FROM cscp.command_recover(%L, %L, %L)', :'b_only', 'cancel', 'r2'), '22023',
                 format('command %s does not exist', :'b_only'), 'owner acting for A: command_recover of B''s id');
SELECT is((SELECT slots ->> 'x_mark' FROM cscp.slot_set(:'b_ctx', 'x_mark', '"a2"')), 'a2',
          'owner acting for A: slot_set of the planted id writes A''s context');
SET cscp.tenant_id = 'plant_b';
SELECT is((SELECT state FROM cscp.command_status(:'b_cmd')), 'canceled'::cscp.command_state,
          'owner acting for B: command_status reads B''s command');
SELECT is((SELECT status FROM cscp.context_transition(:'b_ctx', 'blocked')), 'blocked'::cscp.context_status,
          'owner acting for B: context_transition moves B''s context');
SELECT is((SELECT slots ->> 'x_mark' FROM cscp.context WHERE tenant_id = 'plant_b' AND context_id = :'b_ctx'), 'b',
          'owner acting for B: B''s slot is B''s own');
RESET cscp.tenant_id;
SELECT throws_ok(format('SELECT * FROM cscp.command_status(%L)', :'b_cmd'), '21000', NULL,
                 'owner acting for no tenant: an id two tenants hold is ambiguous (21000), not one of them');
SELECT throws_ok(format('SELECT * FROM cscp.command_transition(%L, %L)', :'b_cmd', 'failed'), '21000', NULL,
                 'owner acting for no tenant: command_transition of an id two tenants hold');
SELECT throws_ok(format('SELECT cscp.slot_set(%L, %L, %L)', :'b_ctx', 'x_mark', '"z"'), '21000', NULL,
                 'owner acting for no tenant: slot_set of an id two tenants hold');
SELECT throws_ok(format('SELECT cscp.context_transition(%L, %L)', :'b_ctx', 'active'), '21000', NULL,
                 'owner acting for no tenant: context_transition of an id two tenants hold');

-- The gateway's functions (as cscp's owner, cscp.tenant_id bound to the key's tenant).
SELECT is((SELECT body ->> 'state' FROM cscp.http_command_status('Bearer ' || :'ka', :'b_cmd')), 'received',
          'gateway, A''s key: the planted id reads A''s command');
SELECT is((SELECT status FROM cscp.http_command_status('Bearer ' || :'ka', :'b_only')), 404,
          'gateway, A''s key: B''s id is 404');
SELECT is((SELECT status FROM cscp.http_command_transition('Bearer ' || :'ka', :'b_only', 'application/json',
                                                            '{"toState": "canceled"}')), 404,
          'gateway, A''s key: a transition of B''s id is 404');
SELECT is((SELECT body ->> 'state' FROM cscp.http_command_status('Bearer ' || :'kb', :'b_cmd')), 'canceled',
          'gateway, B''s key: B''s command');
SELECT is((SELECT body ->> 'state' FROM cscp.http_command_status('Bearer ' || :'kb', :'b_only')), 'canonicalized',
          'gateway, B''s key: B''s other command');
SELECT is((SELECT body FROM cscp.http_command_transition('Bearer ' || :'kb', :'b_only', 'application/json',
                                                          '{"toState": "canceled"}')),
          '{"state": "canceled", "accepted": true, "reasonCode": null}'::jsonb,
          'gateway, B''s key: a transition of B''s command');
SELECT is((SELECT status FROM cscp.http_slot_put('Bearer ' || :'kb', 'conv', 'user', 'x_mark', 'application/json', '"b2"')),
          200, 'gateway, B''s key: a slot of B''s context');
SELECT is((SELECT status FROM cscp.http_slot_delete('Bearer ' || :'kb', 'conv', 'user', 'x_mark')),
          200, 'gateway, B''s key: a slot of B''s context removed');
SELECT is((SELECT body -> 'slots' ->> 'x_mark' FROM cscp.http_slot_put('Bearer ' || :'ka', 'conv', 'planter', 'x_mark',
                                                                        'application/json', '"a3"')),
          'a3', 'gateway, A''s key: a slot of A''s planted context');
SELECT is((SELECT count(*) FROM cscp.context WHERE tenant_id = 'plant_b' AND slots ? 'x_mark'), 0::bigint,
          'after every call, B''s context holds no slot of A''s');

SELECT * FROM finish();
ROLLBACK;
