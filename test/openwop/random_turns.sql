-- The property test of the openwop suite (test/scripts/openwop-schemas.sh): 400 random turns,
-- seeded, each field drawn from values OpenWOP's conversation-turn schema allows and values it
-- forbids (ts of -5 or 1.5, a messageId of 257 characters, an empty from, a bad role or agent, an
-- unknown field, ...), sent through conversation_start, conversation_exchange and
-- conversation_close, and inserted by direct SQL, as the application role.  cscp refuses (22023)
-- what the schema forbids; the suite then exports every conversation and validates it with ajv,
-- so every accepted turn must export valid.  Prints how many were accepted and refused.
\set ON_ERROR_STOP 1
SELECT setseed(0.39);
CREATE TEMP TABLE random_outcome (i int, call text, accepted boolean, sqlstate text);
GRANT ALL ON random_outcome TO openwop_app;
SET ROLE openwop_app;
SET cscp.tenant_id = 'ow';
DO $$
DECLARE
    -- for each field, values the schema allows and values it forbids; a field is drawn from the
    -- forbidden ones one time in ten, left out one time in twenty
    good jsonb := jsonb_build_object(
        'messageId', jsonb_build_array('m', repeat('x', 256), repeat('é', 256)),
        'from', jsonb_build_array('ana', 'bot', repeat('f', 256)),
        'role', '["user", "agent", "system"]'::jsonb,
        'ts', '[0, 5, 1782900000000, 1782900000000.0, 9007199254740991]'::jsonb,
        'content', '[{"text": "hi"}, [1, 2], "str", 1.5, null, true, {"a": {"b": [null]}}]'::jsonb);
    bad jsonb := jsonb_build_object(
        'messageId', jsonb_build_array('', 5, null, repeat('x', 257), repeat('é', 257)),
        'from', jsonb_build_array('', repeat('f', 257), 7, null),
        'role', '["bot", "", null, 1]'::jsonb,
        'ts', '[-5, 1.5, -0.5, 9007199254740992, 1e400, "12", null, true]'::jsonb,
        'content', '[]'::jsonb);
    extra_good jsonb := '[{}, {}, {}, {}, {}, {"to": "ana"}, {"groupId": "g"}, {"speakerId": "host:bot"},
                          {"agent": {"agentId": "bot", "agentSharing": "shared"}}, {"turnIndex": 0},
                          {"agent": {"agentId": "bot", "extra": 1}}, {"to": "", "groupId": ""}]';
    extra_bad jsonb := '[{"groupId": 3}, {"speakerId": ""}, {"agent": {"agentId": ""}},
                         {"agent": {"agentSharing": "everyone"}}, {"agent": {"memoryRef": 1}}, {"agent": "bot"},
                         {"unknownField": 1}, {"turnIndex": -1}, {"turnIndex": 1.5}]'::jsonb
                       || jsonb_build_array(jsonb_build_object('to', repeat('t', 257)));
    pool jsonb;
    conv text;
    turn jsonb;
    k text;
    v jsonb;
    call text;
    st text;
    r float8;
BEGIN
    FOR i IN 1..400 LOOP
        -- 20 conversations, one with a 250-character id (its made-up message ids are too long)
        conv := CASE WHEN i % 20 = 0 THEN repeat('c', 250) ELSE 'r-' || (i % 20) END;
        turn := '{}';
        FOREACH k IN ARRAY ARRAY['messageId', 'from', 'role', 'ts', 'content'] LOOP
            r := random();
            CONTINUE WHEN r < 0.05 OR (k = 'messageId' AND r < 0.5);
            pool := CASE WHEN r < 0.15 AND jsonb_array_length(bad -> k) > 0 THEN bad -> k ELSE good -> k END;
            v := pool -> floor(random() * jsonb_array_length(pool))::int;
            IF v = '"m"' THEN
                v := to_jsonb('m-' || i);
            END IF;
            turn := turn || jsonb_build_object(k, v);
        END LOOP;
        pool := CASE WHEN random() < 0.1 THEN extra_bad ELSE extra_good END;
        turn := turn || (pool -> floor(random() * jsonb_array_length(pool))::int);
        call := CASE WHEN i <= 20 THEN 'start'
                     ELSE (ARRAY['exchange', 'exchange', 'exchange', 'exchange', 'exchange', 'exchange',
                                 'close', 'insert', 'insert', 'start'])[1 + floor(random() * 10)::int] END;
        BEGIN
            CASE call
            WHEN 'start' THEN
                PERFORM cscp.conversation_start('ow', conv, 'bot', turn);
            WHEN 'exchange' THEN
                PERFORM cscp.conversation_exchange('ow', conv, turn);
            WHEN 'close' THEN
                PERFORM cscp.conversation_close('ow', conv, turn, '{"done": true}');
            ELSE
                INSERT INTO cscp.turn (tenant_id, conversation_id, message_id, role, sender, content, ts, extra)
                VALUES ('ow', conv, turn ->> 'messageId', turn ->> 'role', turn ->> 'from', turn -> 'content',
                        CASE WHEN jsonb_typeof(turn -> 'ts') = 'number' THEN (turn ->> 'ts')::numeric END,
                        nullif(turn - ARRAY['messageId', 'role', 'from', 'content', 'ts', 'turnIndex'], '{}'));
            END CASE;
            INSERT INTO pg_temp.random_outcome VALUES (i, call, true, NULL);
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE;
            INSERT INTO pg_temp.random_outcome VALUES (i, call, false, st);
        END;
    END LOOP;
END
$$;
RESET ROLE;
-- Refusals are 22023 (a bad field), 55000 (a closed conversation) or 23505 (a message id reused
-- in a direct INSERT); anything else is a failure of the test.
SELECT CASE WHEN count(*) FILTER (WHERE NOT accepted AND sqlstate NOT IN ('22023', '55000', '23505')) > 0
            THEN 'unexpected refusals: ' || string_agg(DISTINCT sqlstate, ', ') FILTER (WHERE NOT accepted)
            ELSE 'random turns: ' || count(*) FILTER (WHERE accepted) || ' accepted, '
                 || count(*) FILTER (WHERE NOT accepted) || ' refused' END
  FROM pg_temp.random_outcome;
SELECT CASE WHEN count(*) FILTER (WHERE accepted) < 40 THEN 'too few accepted: ' || count(*) FILTER (WHERE accepted) END
  FROM pg_temp.random_outcome;
