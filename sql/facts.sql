\i sql/include/helpers.sql
-- State layers and facts (DESIGN section 8): identity, authority ranks, fact_write with
-- supersession by id and by key, the authority check, repair propagation, memory types, scopes,
-- the chain trigger against direct SQL, fact_current and fact_history, the working set and the
-- environment.  Every refused call is shown with its SQLSTATE and whether it wrote anything.
SET timezone = 'UTC';
SET cscp.clock = '2026-06-01 09:00:00+00';

-- Everything of a tenant in the fact tables, as one digest.
CREATE FUNCTION public.fact_tables(t text) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT md5(coalesce(string_agg(x, '|' ORDER BY x), '')) FROM (
        SELECT f::text AS x FROM cscp.fact f WHERE f.tenant_id = t
        UNION ALL SELECT i::text FROM cscp.identity i WHERE i.tenant_id = t
        UNION ALL SELECT a::text FROM cscp.authority a WHERE a.tenant_id = t
        UNION ALL SELECT w::text FROM cscp.working_set w WHERE w.tenant_id = t
        UNION ALL SELECT e::text FROM cscp.environment e WHERE e.tenant_id = t) s
$$;
-- try(sql), and whether the tenant's rows are as they were afterwards.
CREATE FUNCTION public.refused(t text, sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    before text := public.fact_tables(t);
    r text := public.try(sql);
BEGIN
    RETURN r || CASE WHEN public.fact_tables(t) IS NOT DISTINCT FROM before
                     THEN ' [nothing written]' ELSE ' [WRITTEN]' END;
END
$$;
-- A subject's facts, oldest first.
CREATE FUNCTION public.facts(t text, s text)
RETURNS TABLE(fact_id text, key text, value jsonb, valid boolean, superseded_by text, supersedes text,
              authority text, rank int, memory_type text, scope text, scope_id text,
              review boolean, depends_on text[], derived text[])
LANGUAGE sql STABLE AS $$
    SELECT regexp_replace(f.fact_id, '^f-[0-9a-f-]{36}$', 'f-<uuid>'), f.key, f.value, f.is_valid, f.superseded_by, f.supersedes, f.authority,
           f.authority_rank, f.memory_type::text, f.scope::text, f.scope_id, f.needs_review,
           f.depends_on, f.derived_facts
      FROM cscp.fact f WHERE f.tenant_id = t AND f.subject_id = s ORDER BY f.created_at, f.fact_id
$$;

-- Authority ranks: the defaults, a tenant's own, re-ranking.
SELECT authority, rank FROM cscp.authority WHERE tenant_id = '*' ORDER BY rank DESC;
SELECT cscp.authority_set('fx', 'cfo', 500);
SELECT cscp.authority_set('fx', 'intern', 50);
SELECT cscp.authority_set('fx', 'intern', 60);
SELECT cscp.authority_rank('fx', 'intern') AS intern, cscp.authority_rank('fx', 'manager') AS manager,
       cscp.authority_rank('other', 'intern') AS intern_elsewhere, cscp.authority_rank('fx', 'nobody') AS unknown;
SELECT refused('fx', $$SELECT cscp.authority_set('fx', 'ceo', 0)$$);
SELECT refused('fx', $$SELECT cscp.authority_set('fx', 'ceo', NULL)$$);
SELECT refused('fx', $$SELECT cscp.authority_set('fx', 'ceo', 1000001)$$);
SELECT refused('fx', $$SELECT cscp.authority_set('fx', NULL, 10)$$);
SELECT refused('fx', $$SELECT cscp.authority_set('fx', '', 10)$$);
SELECT refused('fx', $$SELECT cscp.authority_set(NULL, 'ceo', 10)$$);

-- Identity: set once; the same again is a no-op, a different one is refused.
SELECT cscp.identity_set('fx', 'maria', '{"user_name": "Maria", "user_id": "u-17", "authority": "employee",
                                          "department": "Sales", "organization": "Acme",
                                          "permissions": ["orders.read"]}');
SELECT cscp.identity_set('fx', 'maria', '{"user_name": "Maria", "user_id": "u-17", "authority": "employee",
                                          "department": "Sales", "organization": "Acme",
                                          "permissions": ["orders.read"]}') AS same_again;
SELECT refused('fx', $$SELECT cscp.identity_set('fx', 'maria', '{"user_name": "Maria", "authority": "manager"}')$$);
SELECT refused('fx', $$SELECT cscp.identity_set('fx', 'bob', '"Bob"')$$);
SELECT refused('fx', $$SELECT cscp.identity_set('fx', 'bob', '[]')$$);
SELECT refused('fx', $$SELECT cscp.identity_set('fx', 'bob', NULL)$$);
SELECT refused('fx', $$SELECT cscp.identity_set('fx', 'bob', '{"user_name": 7}')$$);
SELECT refused('fx', $$SELECT cscp.identity_set('fx', 'bob', '{"permissions": "all"}')$$);
SELECT refused('fx', $$SELECT cscp.identity_set('fx', 'bob', '{"permissions": ["a", 1]}')$$);
SELECT refused('fx', $$SELECT cscp.identity_set('fx', NULL, '{}')$$);
-- Other keys are kept as they are.
SELECT cscp.identity_set('fx', 'bob', '{"user_name": "Bob", "communication_style": "brief"}');
-- Direct SQL is held to the same rule: no change without a replace that says why.
SELECT refused('fx', $$UPDATE cscp.identity SET identity = '{"user_name": "Mallory"}' WHERE subject_id = 'maria'$$);
SELECT refused('fx', $$UPDATE cscp.identity SET version = 7 WHERE subject_id = 'maria'$$);
SELECT refused('fx', $$UPDATE cscp.identity SET history = '[{"version": 0}]' WHERE subject_id = 'maria'$$);
SELECT refused('fx', $$UPDATE cscp.identity SET reason = 'why not' WHERE subject_id = 'maria'$$);
SELECT refused('fx', $$UPDATE cscp.identity SET subject_id = 'eve' WHERE subject_id = 'maria'$$);
-- The explicit replace keeps the replaced version, when and why.
SELECT refused('fx', $$SELECT cscp.identity_replace('fx', 'maria', '{"user_name": "Maria"}', ' ')$$);
SELECT refused('fx', $$SELECT cscp.identity_replace('fx', 'maria', '{"user_name": "Maria"}', NULL)$$);
SELECT refused('fx', $$SELECT cscp.identity_replace('fx', 'nobody', '{"user_name": "X"}', 'typo')$$);
SET cscp.clock = '2026-06-01 09:30:00+00';
SELECT cscp.identity_replace('fx', 'maria', '{"user_name": "Maria", "user_id": "u-17", "authority": "manager",
                                             "department": "Sales", "organization": "Acme"}', 'promoted to sales manager');
SELECT subject_id, version, set_at, reason, identity ->> 'authority' AS authority, jsonb_pretty(history) AS history
  FROM cscp.identity WHERE tenant_id = 'fx' AND subject_id = 'maria';
-- A replace by direct SQL that gives a reason is recorded the same way.
UPDATE cscp.identity SET identity = identity || '{"department": "Sales EMEA"}', reason = 'moved to EMEA'
 WHERE tenant_id = 'fx' AND subject_id = 'maria';
SELECT version, reason, jsonb_array_length(history) AS replaced, history -> 1 ->> 'reason' AS last_replaced_because
  FROM cscp.identity WHERE tenant_id = 'fx' AND subject_id = 'maria';
SET cscp.clock = '2026-06-01 10:00:00+00';

-- fact_write: a fact, with the authority taken from the writer's identity when the source names none.
SELECT fact_id, key, value, is_valid, authority, authority_rank, memory_type, scope, created_at
  FROM cscp.fact_write('fx', 'maria', 'home-1', 'home_city', '"Lisbon"');
-- A generated id; source authority wins; memory type from the source type.
SELECT fact_id ~ '^f-[0-9a-f]{8}-' AS generated_id, authority, memory_type
  FROM cscp.fact_write('fx', 'maria', NULL, 'preferred_tool', '"spreadsheet"', '{"type": "tool", "authority": "guest"}');
SELECT fact_id, memory_type FROM cscp.fact_write('fx', 'maria', 'pol-1', 'travel_class', '"economy"',
                                                 '{"type": "policy", "authority": "policy"}', is_constraint => true,
                                                 constraint_type => 'travel');
SELECT fact_id, memory_type FROM cscp.fact_write('fx', 'maria', 'mt-1', 'note', '"x"', '{"type": "webhook"}',
                                                 memory_type => 'organizational');
-- A subject without identity and a source without authority: guest.
SELECT authority, authority_rank FROM cscp.fact_write('fx', 'nobody', 'n-1', 'k', '1');

-- Bad input: 22023, nothing written.
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', NULL, '1')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', '', '1')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', NULL)$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', NULL, 'x', 'k', '1')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', '', 'k', '1')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', scope => 'galaxy')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', scope => NULL)$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', scope => 'task')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', scope => 'session')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', scope_id => 't-1')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', memory_type => 'episodic')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', '{"type": "user", "authority": "king"}')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', '{"type": "user", "authority": 3}')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', '{"authority": "guest"}')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', '"user"')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', NULL)$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', '{"type": "user", "turn_index": "3"}')$$);
-- Memory types: the spec's source types are classified, anything else is user memory.
SELECT t AS source_type, (cscp.fact_write('fx', 'classify', 'mt-' || t, 'note_' || t, '"x"',
                                          jsonb_build_object('type', t, 'authority', 'employee'))).memory_type
  FROM unnest(ARRAY['state_write', 'finance_system', 'hr_system', 'pattern', 'heuristic', 'decision',
                    'preference', 'policy', 'observation', 'user', 'webhook']) t;
DELETE FROM cscp.fact WHERE tenant_id = 'fx' AND subject_id = 'classify';
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', depends_on => NULL)$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', depends_on => '{NULL}')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', depends_on => '{{home-1},{pol-1}}')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', depends_on => '{home-1,ghost}')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', depends_on => '{x}')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'bob', 'x', 'k', '1', depends_on => '{home-1}')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', is_constraint => NULL)$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'k', '1', constraint_type => 'budget')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'home-1', 'k', '1')$$);

-- Supersession by fact id.
SELECT fact_id, supersedes, is_valid FROM cscp.fact_write('fx', 'maria', 'home-2', 'home_city', '"Porto"', supersedes => 'home-1');
-- Superseding an already superseded fact: refused, the current fact is named.
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'home-x', 'home_city', '"Faro"', supersedes => 'home-1')$$);
-- Supersession by key: one candidate.
SELECT fact_id, supersedes FROM cscp.fact_write('fx', 'maria', 'home-3', 'home_city', '"Braga"', supersedes => 'home_city');
-- Zero candidates: no fact with that id, no valid fact with that key (in this scope).
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'home_city', '"Faro"', supersedes => 'office_city')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'home_city', '"Faro"', supersedes => 'home_city', scope => 'task', scope_id => 't-1')$$);
-- Two candidates: two valid facts share a key.
SELECT fact_id FROM cscp.fact_write('fx', 'maria', 'phone-1', 'phone', '"+351 1"');
SELECT fact_id FROM cscp.fact_write('fx', 'maria', 'phone-2', 'phone', '"+351 2"');
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'phone', '"+351 3"', supersedes => 'phone')$$);
-- The same key in another scope is another candidate set.
SELECT fact_id, scope, scope_id FROM cscp.fact_write('fx', 'maria', 'phone-t', 'phone', '"+351 9"', scope => 'task', scope_id => 't-1');
SELECT fact_id, supersedes FROM cscp.fact_write('fx', 'maria', 'phone-t2', 'phone', '"+351 8"', supersedes => 'phone', scope => 'task', scope_id => 't-1');
-- With policy supersede_same_key, a write replaces the valid fact of its key (none: a plain write).
SELECT cscp.policy_set('fx', '{"supersede_same_key": true}') ->> 'supersede_same_key' AS supersede_same_key;
SELECT fact_id, supersedes FROM cscp.fact_write('fx', 'maria', 'email-1', 'email', '"m@a.pt"');
SELECT fact_id, supersedes FROM cscp.fact_write('fx', 'maria', 'email-2', 'email', '"maria@a.pt"');
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'x', 'phone', '"+351 3"')$$);
SELECT cscp.policy_set('fx', '{"supersede_same_key": null}') ->> 'supersede_same_key' AS supersede_same_key;

-- Authority: a lower authority cannot supersede a higher one (42501, nothing written); equal or higher can.
SELECT fact_id, authority FROM cscp.fact_write('fx', 'maria', 'lim-1', 'expense_limit', '"500 EUR"',
                                               '{"type": "policy", "authority": "cfo"}', is_constraint => true);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'lim-x', 'expense_limit', '"5000 EUR"', '{"type": "user", "authority": "intern"}', supersedes => 'lim-1')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'lim-x', 'expense_limit', '"5000 EUR"', '{"type": "user", "authority": "manager"}', supersedes => 'expense_limit')$$);
SELECT fact_id, authority, supersedes FROM cscp.fact_write('fx', 'maria', 'lim-2', 'expense_limit', '"800 EUR"',
                                                           '{"type": "policy", "authority": "cfo"}', supersedes => 'lim-1', is_constraint => true);
-- Authority is checked before every write of a key, not only when superseding: the intern's
-- plain write of a key that holds the CFO's valid fact is refused (42501, nothing written), by
-- fact_write and by a direct INSERT alike; the CFO and equal ranks may; a hypothetical or draft
-- proposal may (never told); another key, or another task's scope, is free.
SELECT fact_id FROM cscp.fact_write('fx', 'maria', 'disc-pol', 'discount_policy', '"max 15%"', '{"type": "policy", "authority": "cfo"}');
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'disc-x', 'discount_policy', '"50%"', '{"type": "user", "authority": "intern"}')$$);
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'disc-x', 'discount_policy', '"50%"', '{"type": "user", "authority": "intern"}', scope => 'task', scope_id => 't-1')$$);
SELECT refused('fx', $$INSERT INTO cscp.fact (tenant_id, subject_id, fact_id, key, value, source)
                       VALUES ('fx', 'maria', 'disc-x', 'discount_policy', '"50%"', '{"type": "user", "authority": "intern"}')$$);
SELECT fact_id, scope FROM cscp.fact_write('fx', 'maria', 'disc-h', 'discount_policy', '"what if 50%?"', '{"type": "user", "authority": "intern"}', scope => 'hypothetical');
SELECT fact_id, authority FROM cscp.fact_write('fx', 'maria', 'disc-note', 'discount_note', '"asked for a bigger discount"', '{"type": "user", "authority": "intern"}');
SELECT fact_id, authority FROM cscp.fact_write('fx', 'maria', 'disc-cfo2', 'discount_policy', '"max 15% for partners"', '{"type": "policy", "authority": "cfo"}');
SELECT (r ->> 'text') ~ '50%' AS intern_told, (r ->> 'text') ~ 'max 15%' AS cfo_told
  FROM cscp.build_context('fx', 'maria', 's-1', 'Can we offer 50% discount?') r;
SELECT fact_id FROM cscp.fact_write('fx', 'maria', 'scoped-1', 'room', '"A1"', '{"type": "user", "authority": "cfo"}', scope => 'task', scope_id => 't-1');
SELECT fact_id FROM cscp.fact_write('fx', 'maria', 'scoped-2', 'room', '"B2"', '{"type": "user", "authority": "intern"}', scope => 'task', scope_id => 't-2');
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'maria', 'scoped-3', 'room', '"C3"', '{"type": "user", "authority": "intern"}', scope => 'task', scope_id => 't-1')$$);
-- An identity whose authority the tenant does not rank is refused, not taken as guest.
SELECT cscp.identity_set('fx', 'stranger', '{"user_name": "S", "authority": "wizard"}');
SELECT refused('fx', $$SELECT cscp.fact_write('fx', 'stranger', 's-1', 'spell', '"fireball"')$$);
SELECT fact_id, authority FROM cscp.fact_write('fx', 'stranger', 's-2', 'spell', '"light"', '{"type": "user", "authority": "guest"}');
SELECT cscp.authority_set('fx', 'wizard', 150);
SELECT fact_id, authority, authority_rank FROM cscp.fact_write('fx', 'stranger', 's-3', 'hat', '"pointy"');
DELETE FROM cscp.fact WHERE tenant_id = 'fx' AND subject_id = 'stranger';
DELETE FROM cscp.identity WHERE tenant_id = 'fx' AND subject_id = 'stranger';
DELETE FROM cscp.authority WHERE tenant_id = 'fx' AND authority = 'wizard';
-- The writer's identity gives the authority when the source names none: Maria is a manager now.
SELECT fact_id, authority, supersedes FROM cscp.fact_write('fx', 'maria', 'desk-1', 'desk', '"3.14"', '{"type": "user", "authority": "employee"}');
SELECT fact_id, authority, supersedes FROM cscp.fact_write('fx', 'maria', 'desk-2', 'desk', '"2.07"', '{"type": "user"}', supersedes => 'desk-1');

-- Repair propagation through two levels: price <- discount; total <- price; invoice <- total.
SELECT fact_id FROM cscp.fact_write('fx', 'maria', 'disc-1', 'discount', '"25%"');
SELECT fact_id FROM cscp.fact_write('fx', 'maria', 'price-1', 'price', '"7500"', depends_on => '{disc-1}');
SELECT fact_id FROM cscp.fact_write('fx', 'maria', 'total-1', 'total', '"9075"', depends_on => '{price-1}');
SELECT fact_id FROM cscp.fact_write('fx', 'maria', 'inv-1', 'invoice', '"INV-9"', depends_on => '{total-1,home-3}');
SELECT fact_id, derived, review FROM facts('fx', 'maria') WHERE fact_id IN ('disc-1', 'price-1', 'total-1', 'inv-1', 'home-3');
SELECT fact_id FROM cscp.fact_write('fx', 'maria', 'disc-2', 'discount', '"10%"', supersedes => 'disc-1');
SELECT fact_id, valid, review FROM facts('fx', 'maria') WHERE fact_id IN ('disc-1', 'disc-2', 'price-1', 'total-1', 'inv-1', 'home-3');
-- A fact derived from a superseded or flagged fact is born flagged.
SELECT fact_id, needs_review FROM cscp.fact_write('fx', 'maria', 'late-1', 'late', '1', depends_on => '{disc-1}');
SELECT fact_id, needs_review FROM cscp.fact_write('fx', 'maria', 'late-2', 'late2', '1', depends_on => '{inv-1}');
-- Clearing a flag after review is allowed.
UPDATE cscp.fact SET needs_review = false WHERE tenant_id = 'fx' AND fact_id = 'price-1';

-- fact_current walks to the head; fact_history returns the whole chain, oldest first.
SELECT fact_id, value FROM cscp.fact_current('fx', 'maria', 'home-1');
SELECT fact_id, value FROM cscp.fact_current('fx', 'maria', 'home-3');
SELECT fact_id, value, is_valid, supersedes, superseded_by FROM cscp.fact_history('fx', 'maria', 'home-2');
SELECT fact_id FROM cscp.fact_history('fx', 'maria', 'pol-1');
SELECT refused('fx', $$SELECT cscp.fact_current('fx', 'maria', 'ghost')$$);
SELECT refused('fx', $$SELECT cscp.fact_current('fx', 'bob', 'home-1')$$);
SELECT refused('fx', $$SELECT cscp.fact_current('fx', 'maria', NULL)$$);
SELECT refused('fx', $$SELECT * FROM cscp.fact_history('fx', 'maria', 'ghost')$$);

-- A chain of 30, walked from its start, its middle and its head.
DO $$
BEGIN
    FOR i IN 0..29 LOOP
        PERFORM cscp.fact_write('fx', 'walker', 'w-' || i, 'step', to_jsonb(i),
                                supersedes => CASE WHEN i > 0 THEN 'w-' || (i - 1) END);
    END LOOP;
END
$$;
BEGIN;
SELECT fact_id, value, is_valid FROM cscp.fact_current('fx', 'walker', 'w-0');
SELECT fact_id, value, is_valid FROM cscp.fact_current('fx', 'walker', 'w-17');
SELECT fact_id, value, is_valid FROM cscp.fact_current('fx', 'walker', 'w-29');
SELECT count(*), min(fact_id), bool_and(NOT is_valid) FILTER (WHERE fact_id <> 'w-29')
  FROM cscp.fact_history('fx', 'walker', 'w-5');
COMMIT;
SELECT refused('fx', $$SELECT cscp.fact_current('fx', 'walker', 'w-30')$$);
DELETE FROM cscp.fact WHERE tenant_id = 'fx' AND subject_id = 'walker';

-- Chain corruption by direct SQL is refused.
SELECT refused('fx', $$UPDATE cscp.fact SET is_valid = true, superseded_by = NULL WHERE tenant_id = 'fx' AND fact_id = 'home-1'$$);
SELECT refused('fx', $$UPDATE cscp.fact SET superseded_by = 'home-3' WHERE tenant_id = 'fx' AND fact_id = 'home-1'$$);
SELECT refused('fx', $$UPDATE cscp.fact SET is_valid = false, superseded_by = 'home-1' WHERE tenant_id = 'fx' AND fact_id = 'home-3'$$);
SELECT refused('fx', $$UPDATE cscp.fact SET is_valid = false, superseded_by = 'phone-2' WHERE fact_id = 'phone-1'$$);
SELECT refused('fx', $$UPDATE cscp.fact SET supersedes = 'phone-1' WHERE fact_id = 'phone-2'$$);
SELECT refused('fx', $$UPDATE cscp.fact SET supersedes = 'home-3' WHERE tenant_id = 'fx' AND fact_id = 'home-1'$$);
SELECT refused('fx', $$UPDATE cscp.fact SET value = '"Lisbon"' WHERE tenant_id = 'fx' AND fact_id = 'home-3'$$);
SELECT refused('fx', $$UPDATE cscp.fact SET key = 'office_city' WHERE tenant_id = 'fx' AND fact_id = 'home-3'$$);
SELECT refused('fx', $$UPDATE cscp.fact SET scope = 'hypothetical' WHERE tenant_id = 'fx' AND fact_id = 'home-3'$$);
SELECT refused('fx', $$UPDATE cscp.fact SET derived_facts = '{phone-1}' WHERE tenant_id = 'fx' AND fact_id = 'home-3'$$);
SELECT refused('fx', $$UPDATE cscp.fact SET derived_facts = '{}' WHERE tenant_id = 'fx' AND fact_id = 'home-3'$$);
SELECT refused('fx', $$INSERT INTO cscp.fact (tenant_id, subject_id, fact_id, key, value, is_valid, superseded_by)
                       VALUES ('fx', 'maria', 'x', 'k', '1', false, 'home-3')$$);
SELECT refused('fx', $$INSERT INTO cscp.fact (tenant_id, subject_id, fact_id, key, value, derived_facts)
                       VALUES ('fx', 'maria', 'x', 'k', '1', '{home-3}')$$);
SELECT refused('fx', $$INSERT INTO cscp.fact (tenant_id, subject_id, fact_id, key, value, supersedes)
                       VALUES ('fx', 'maria', 'x', 'home_city', '"Faro"', 'home-2')$$);
SELECT refused('fx', $$INSERT INTO cscp.fact (tenant_id, subject_id, fact_id, key, value, supersedes)
                       VALUES ('fx', 'maria', 'x', 'home_city', '"Faro"', 'x')$$);
SELECT refused('fx', $$INSERT INTO cscp.fact (tenant_id, subject_id, fact_id, key, value, source, supersedes)
                       VALUES ('fx', 'maria', 'x', 'expense_limit', '"9999 EUR"', '{"type": "user", "authority": "intern"}', 'lim-2')$$);
-- (Two foreign keys refuse it; which reports first follows the order of their triggers, which a
-- restore or pg_upgrade may change: the constraint's name is masked.)
SELECT regexp_replace(refused('fx', $$DELETE FROM cscp.fact WHERE tenant_id = 'fx' AND fact_id = 'home-2'$$),
                      'fact_tenant_id_subject_id_supersede(s|d_by)_fkey', 'fact_tenant_id_subject_id_<supersedes or superseded_by>_fkey') AS refused;
SELECT refused('fx', $$DELETE FROM cscp.fact WHERE tenant_id = 'fx' AND fact_id = 'home-3'$$);
-- A direct INSERT that supersedes correctly is linked like fact_write's.
INSERT INTO cscp.fact (tenant_id, subject_id, fact_id, key, value, supersedes)
VALUES ('fx', 'maria', 'home-4', 'home_city', '"Coimbra"', 'home-3');
SELECT fact_id, valid, superseded_by, supersedes, authority, memory_type FROM facts('fx', 'maria') WHERE key = 'home_city';

-- A chain corrupted with the triggers off is refused, never followed round a loop.
SET session_replication_role = replica;
INSERT INTO cscp.fact (tenant_id, subject_id, fact_id, key, value, authority, authority_rank, memory_type,
                       is_valid, superseded_by, supersedes)
VALUES ('fx', 'loop', 'a', 'k', '1', 'guest', 100, 'user', false, 'b', 'b'),
       ('fx', 'loop', 'b', 'k', '2', 'guest', 100, 'user', false, 'a', 'a'),
       ('fx', 'loop', 'c', 'k', '3', 'guest', 100, 'user', false, 'gone', NULL),
       ('fx', 'loop', 'd', 'k', '4', 'guest', 100, 'user', false, 'e', NULL),
       ('fx', 'loop', 'e', 'k', '5', 'guest', 100, 'user', true, NULL, 'c');
RESET session_replication_role;
SELECT try($$SELECT cscp.fact_current('fx', 'loop', 'a')$$);
SELECT try($$SELECT * FROM cscp.fact_history('fx', 'loop', 'b')$$);
SELECT try($$SELECT cscp.fact_current('fx', 'loop', 'c')$$);
SELECT try($$SELECT cscp.fact_current('fx', 'loop', 'd')$$);
SELECT try($$SELECT * FROM cscp.fact_history('fx', 'loop', 'e')$$);
-- The same after a VACUUM (the steps' queries may then read the primary key's entries alone).
VACUUM cscp.fact;
SELECT try($$SELECT cscp.fact_current('fx', 'loop', 'a')$$);
SELECT try($$SELECT cscp.fact_current('fx', 'loop', 'c')$$);
SELECT try($$SELECT cscp.fact_current('fx', 'loop', 'd')$$);
DELETE FROM cscp.fact WHERE tenant_id = 'fx' AND subject_id = 'loop';

-- The whole state of Maria's facts.
SELECT * FROM facts('fx', 'maria');

-- Working set: TTL, expired never returned, a put into an expired item starts afresh.
SELECT cscp.ws_put('fx', 's-1', 'draft', '{"to": "Ana"}', interval '10 minutes');
SELECT cscp.ws_put('fx', 's-1', 'cart', '["tea"]');
SELECT cscp.ws_get('fx', 's-1', 'draft') AS draft, cscp.ws_get('fx', 's-1', 'cart') AS cart,
       cscp.ws_get('fx', 's-2', 'draft') AS other_session, cscp.ws_get('fx', 's-1', 'none') AS absent;
SELECT key, expires_at FROM cscp.working_set WHERE tenant_id = 'fx' ORDER BY key;
SET cscp.clock = '2026-06-01 10:10:00+00';
SELECT cscp.ws_get('fx', 's-1', 'draft') AS draft_at_expiry, cscp.ws_get('fx', 's-1', 'cart') AS cart;
SELECT cscp.ws_put('fx', 's-1', 'draft', '{"to": "Rui"}', interval '5 minutes');
SELECT cscp.ws_get('fx', 's-1', 'draft') AS new_draft;
SELECT key, created_at, expires_at FROM cscp.working_set WHERE tenant_id = 'fx' AND key = 'draft';
SELECT refused('fx', $$SELECT cscp.ws_put('fx', 's-1', 'k', NULL)$$);
SELECT refused('fx', $$SELECT cscp.ws_put('fx', 's-1', NULL, '1')$$);
SELECT refused('fx', $$SELECT cscp.ws_put('fx', NULL, 'k', '1')$$);
SELECT refused('fx', $$SELECT cscp.ws_put('fx', 's-1', 'k', '1', interval '-1 minute')$$);
SELECT refused('fx', $$SELECT cscp.ws_put('fx', 's-1', 'k', '1', interval '90 days')$$);
SELECT refused('fx', $$SELECT cscp.ws_get('fx', 's-1', NULL)$$);

-- Environment: one object per session, replaced by each env_set.
SELECT cscp.env_set('fx', 's-1', '{"location": "Lisbon", "device": "phone"}');
SELECT cscp.env_set('fx', 's-1', '{"location": "Porto"}');
SELECT session_id, environment FROM cscp.environment WHERE tenant_id = 'fx';
SELECT refused('fx', $$SELECT cscp.env_set('fx', 's-1', '[1]')$$);
SELECT refused('fx', $$SELECT cscp.env_set('fx', 's-1', NULL)$$);
SELECT refused('fx', $$SELECT cscp.env_set('fx', NULL, '{}')$$);

-- The suite's rows and helpers go.
DELETE FROM cscp.fact WHERE tenant_id = 'fx';
DELETE FROM cscp.identity WHERE tenant_id = 'fx';
DELETE FROM cscp.authority WHERE tenant_id = 'fx';
DELETE FROM cscp.working_set WHERE tenant_id = 'fx';
DELETE FROM cscp.environment WHERE tenant_id = 'fx';
DELETE FROM cscp.policy WHERE tenant_id = 'fx';
DROP FUNCTION facts(text, text), refused(text, text), fact_tables(text);
RESET cscp.clock;
