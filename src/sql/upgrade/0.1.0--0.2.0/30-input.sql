
-- 30-input: minimal data in contexts.  Two policy keys, slot_max_length and
-- slot_refuse_card_numbers, with their defaults in tenant '*' (a key the
-- owner already set there is kept).  Their checks are C (slots.c,
-- context_fsm.c); rows stored before are checked only when they change.
UPDATE cscp.policy
   SET settings = '{"slot_max_length": 256, "slot_refuse_card_numbers": true}'::jsonb OPERATOR(pg_catalog.||) settings
 WHERE tenant_id OPERATOR(pg_catalog.=) '*';

-- A turn whose validation would spend more than its work budget (54000, jsonschema.c) answers
-- 422 validation_too_costly over HTTP, not 500.
CREATE OR REPLACE FUNCTION cscp._http_turn_failure(sqlstate text, message text, detail text DEFAULT NULL)
RETURNS cscp.http_response
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN $1 OPERATOR(pg_catalog.~~) '22%' THEN cscp._http_error(400, 'validation_error', $2, $1, $3)
                WHEN $1 OPERATOR(pg_catalog.=) '54000' THEN cscp._http_error(422, 'validation_too_costly', $2, $1, $3)
                ELSE cscp._http_failure($1, $2, $3) END
$$;
COMMENT ON FUNCTION cscp._http_turn_failure(text, text, text) IS
  'Internal: the HTTP response to an error of a conversation call (22xxx: 400 validation_error, 54000: 422 validation_too_costly, else as cscp._http_failure)';
