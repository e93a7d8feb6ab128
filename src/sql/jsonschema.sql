-- jsonschema.sql: JSON Schema validation of jsonb values, for the subset src/shared/jsonschema.c documents.

CREATE FUNCTION cscp.jsonschema_check(schema jsonb) RETURNS jsonb
    AS 'MODULE_PATHNAME', 'cscp_jsonschema_check_sql' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.jsonschema_check(jsonb) IS
  'The schema itself if it uses only the supported JSON Schema subset with well-formed values; else 22023 naming the keyword and its path';

CREATE FUNCTION cscp.jsonschema_validate(schema jsonb, instance jsonb) RETURNS text
    AS 'MODULE_PATHNAME', 'cscp_jsonschema_validate_sql' LANGUAGE C IMMUTABLE PARALLEL SAFE;
COMMENT ON FUNCTION cscp.jsonschema_validate(jsonb, jsonb) IS
  'NULL if instance is valid against schema, else its first violation as "<path>: <reason>", e.g. "$.items[1]: string is longer than 10 characters"; checks the schema first as jsonschema_check does';
