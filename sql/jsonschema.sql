\i sql/include/helpers.sql
-- JSON Schema validation (src/shared/jsonschema.c): every keyword with a passing and a failing
-- instance, the path of the first violation, and the refusal of unusable schemas with 22023.

-- A usable schema comes back as given.
SELECT cscp.jsonschema_check('{"type": "object", "properties": {"a": {"type": "string"}}}');
SELECT cscp.jsonschema_check('true'), cscp.jsonschema_check('false');

-- Every keyword: NULL means valid, otherwise "<path>: <reason>".
SELECT label, cscp.jsonschema_validate(schema::jsonb, instance::jsonb) AS result FROM (VALUES
    ('type string ok',          '{"type": "string"}',                         '"x"'),
    ('type string bad',         '{"type": "string"}',                         '1'),
    ('type null ok',            '{"type": "null"}',                           'null'),
    ('type null bad',           '{"type": "null"}',                           'false'),
    ('type boolean ok',         '{"type": "boolean"}',                        'true'),
    ('type boolean bad',        '{"type": "boolean"}',                        'null'),
    ('type object ok',          '{"type": "object"}',                         '{}'),
    ('type object bad',         '{"type": "object"}',                         '[]'),
    ('type array ok',           '{"type": "array"}',                          '[1]'),
    ('type array bad',          '{"type": "array"}',                          '{"a": 1}'),
    ('type number ok int',      '{"type": "number"}',                         '3'),
    ('type number ok frac',     '{"type": "number"}',                         '3.5'),
    ('type number bad',         '{"type": "number"}',                         '"3"'),
    ('type integer ok',         '{"type": "integer"}',                        '42'),
    ('type integer ok 1.0',     '{"type": "integer"}',                        '1.0'),
    ('type integer ok -7e2',    '{"type": "integer"}',                        '-7e2'),
    ('type integer bad 1.5',    '{"type": "integer"}',                        '1.5'),
    ('type integer bad string', '{"type": "integer"}',                        '"1"'),
    ('type array of 2 ok',      '{"type": ["integer", "null"]}',              'null'),
    ('type array of 2 ok int',  '{"type": ["integer", "null"]}',              '7'),
    ('type array of 2 bad',     '{"type": ["integer", "null"]}',              '"7"'),
    ('type array of 3 bad',     '{"type": ["string", "boolean", "array"]}',   '{}'),
    ('enum ok',                 '{"enum": ["a", 1, null, {"k": [1]}]}',        '{"k": [1.0]}'),
    ('enum ok null',            '{"enum": ["a", 1, null]}',                   'null'),
    ('enum bad',                '{"enum": ["a", 1, null]}',                   '"b"'),
    ('enum empty bad',          '{"enum": []}',                               '1'),
    ('const ok',                '{"const": {"a": [1, "x"]}}',                 '{"a": [1, "x"]}'),
    ('const bad',               '{"const": {"a": [1, "x"]}}',                 '{"a": [1]}'),
    ('const null bad',          '{"const": null}',                            '0'),
    ('minLength ok multibyte',  '{"minLength": 5}',                           '"ñandú"'),
    ('minLength bad multibyte', '{"minLength": 6}',                           '"ñandú"'),
    ('maxLength ok multibyte',  '{"maxLength": 5}',                           '"ñandú"'),
    ('maxLength bad',           '{"maxLength": 4}',                           '"ñandú"'),
    ('maxLength 0 ok',          '{"maxLength": 0}',                           '""'),
    ('minLength not string',    '{"minLength": 5}',                           '12'),
    ('pattern ok unanchored',   '{"pattern": "b+"}',                          '"abbbc"'),
    ('pattern ok anchored',     '{"pattern": "^[a-z]+$"}',                    '"abc"'),
    ('pattern bad anchored',    '{"pattern": "^[a-z]+$"}',                    '"abc1"'),
    ('pattern bad',             '{"pattern": "\\d{3}"}',                      '"12x"'),
    ('pattern ok multibyte',    '{"pattern": "^.{5}$"}',                      '"ñandú"'),
    ('pattern case sensitive',  '{"pattern": "^abc$"}',                       '"ABC"'),
    ('pattern not string',      '{"pattern": "^a$"}',                         '5'),
    ('minimum ok equal',        '{"minimum": 5}',                             '5'),
    ('minimum bad',             '{"minimum": 5}',                             '4.99'),
    ('maximum ok equal',        '{"maximum": 10.5}',                          '10.50'),
    ('maximum bad',             '{"maximum": 10.5}',                          '11'),
    ('exclusiveMinimum ok',     '{"exclusiveMinimum": 0}',                    '0.001'),
    ('exclusiveMinimum bad',    '{"exclusiveMinimum": 0}',                    '0'),
    ('exclusiveMaximum ok',     '{"exclusiveMaximum": 100}',                  '99'),
    ('exclusiveMaximum bad',    '{"exclusiveMaximum": 100}',                  '100.0'),
    ('minimum not number',      '{"minimum": 5}',                             '"1"'),
    ('big numbers',             '{"maximum": 1e30}',                          '1e31'),
    ('minItems ok',             '{"minItems": 2}',                            '[1, 2]'),
    ('minItems bad',            '{"minItems": 2}',                            '[1]'),
    ('maxItems ok',             '{"maxItems": 2}',                            '[]'),
    ('maxItems bad',            '{"maxItems": 2}',                            '[1, 2, 3]'),
    ('minItems not array',      '{"minItems": 2}',                            '{}'),
    ('uniqueItems ok',          '{"uniqueItems": true}',                      '[1, "1", [1], {"a": 1}]'),
    ('uniqueItems bad',         '{"uniqueItems": true}',                      '[1, "a", 2, 1.0]'),
    ('uniqueItems bad objects', '{"uniqueItems": true}',                      '[{"a": 1, "b": 2}, {"b": 2, "a": 1}]'),
    ('uniqueItems bad first',   '{"uniqueItems": true}',                      '[[1], 2, {"a": 3}, 2.0, [1.0], {"a": 3}]'),
    ('uniqueItems false',       '{"uniqueItems": false}',                     '[1, 1]'),
    ('items ok',                '{"items": {"type": "string", "maxLength": 10}}', '["a", "b"]'),
    ('items bad',               '{"items": {"type": "string", "maxLength": 10}}', '["a", "abcdefghijk"]'),
    ('items on object',         '{"items": {"type": "string"}}',              '{"a": 1}'),
    ('required ok',             '{"required": ["to", "amount"]}',             '{"to": "x", "amount": 1}'),
    ('required bad',            '{"required": ["to", "amount"]}',             '{"amount": 1}'),
    ('required not object',     '{"required": ["to"]}',                       '"to"'),
    ('properties ok',           '{"properties": {"amount": {"type": "integer"}}}', '{"amount": 5, "other": "x"}'),
    ('properties bad',          '{"properties": {"amount": {"type": "integer"}}}', '{"amount": "5"}'),
    ('properties absent ok',    '{"properties": {"amount": {"type": "integer"}}}', '{}'),
    ('additionalProperties false ok',  '{"properties": {"x": {}}, "additionalProperties": false}', '{"x": 1}'),
    ('additionalProperties false bad', '{"properties": {"x": {}}, "additionalProperties": false}', '{"x": 1, "y": 2}'),
    ('additionalProperties schema ok', '{"properties": {"x": {}}, "additionalProperties": {"type": "number"}}', '{"x": "s", "y": 2}'),
    ('additionalProperties schema bad', '{"properties": {"x": {}}, "additionalProperties": {"type": "number"}}', '{"x": "s", "y": "2"}'),
    ('additionalProperties alone', '{"additionalProperties": {"type": "string"}}', '{"a": "s", "b": null}'),
    ('allOf ok',                '{"allOf": [{"type": "string"}, {"minLength": 2}]}', '"ab"'),
    ('allOf bad second',        '{"allOf": [{"type": "string"}, {"minLength": 2}]}', '"a"'),
    ('anyOf ok',                '{"anyOf": [{"type": "string"}, {"minimum": 10}]}', '12'),
    ('anyOf bad',               '{"anyOf": [{"type": "string"}, {"minimum": 10}]}', '9'),
    ('oneOf ok',                '{"oneOf": [{"type": "integer"}, {"type": "string"}]}', '"a"'),
    ('oneOf bad none',          '{"oneOf": [{"type": "integer"}, {"type": "string"}]}', 'null'),
    ('oneOf bad two',           '{"oneOf": [{"type": "integer"}, {"type": "number"}]}', '3'),
    ('oneOf ok one of two',     '{"oneOf": [{"type": "integer"}, {"type": "number"}]}', '3.5'),
    ('not ok',                  '{"not": {"type": "null"}}',                  '0'),
    ('not bad',                 '{"not": {"type": "null"}}',                  'null'),
    ('true schema',             'true',                                       '{"anything": [1]}'),
    ('false schema',            'false',                                      '1'),
    ('empty schema',            '{}',                                         '[null]'),
    ('false in properties',     '{"properties": {"secret": false}}',          '{"secret": 1}'),
    ('true in items',           '{"items": true}',                            '[1, "a"]'),
    ('annotations ignored',     '{"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "x", "title": "t", "description": "d", "$comment": "c", "default": 1, "examples": [1], "type": "integer"}', '1'),
    ('annotations bad',         '{"title": "t", "type": "integer"}',          '1.5')
) AS t(label, schema, instance);

-- Nested paths, through objects and arrays; member names that are not identifiers are quoted.
SELECT label, cscp.jsonschema_validate(schema::jsonb, instance::jsonb) AS result FROM (VALUES
    ('nested ok',      '{"type": "object", "required": ["a"], "properties": {"a": {"properties": {"b": {"items": {"type": "integer"}}}}}}',
                       '{"a": {"b": [1, 2, 3]}}'),
    ('nested bad',     '{"type": "object", "required": ["a"], "properties": {"a": {"properties": {"b": {"items": {"type": "integer"}}}}}}',
                       '{"a": {"b": [1, 2, "3"]}}'),
    ('array of objects', '{"items": {"required": ["to"], "properties": {"to": {"type": "string"}}}}',
                       '[{"to": "a"}, {"to": "b"}, {"from": "c"}]'),
    ('arrays in arrays', '{"items": {"items": {"maximum": 3}}}',
                       '[[1], [2, 3, 4]]'),
    ('quoted names',   '{"properties": {"a b": {"properties": {"q\"uo\\te": {"type": "string"}}}}}',
                       '{"a b": {"q\"uo\\te": 1}}'),
    ('first violation', '{"type": "object", "required": ["to"], "properties": {"amount": {"type": "integer"}}}',
                       '{"amount": "x"}'),
    ('first by key order', '{"additionalProperties": {"type": "integer"}}',
                       '{"bb": "x", "a": "y"}'),
    ('through allOf',  '{"allOf": [{"properties": {"x": {"pattern": "^[a-z]+$"}}}]}',
                       '{"x": "ABC"}'),
    ('anyOf inside',   '{"properties": {"a": {"anyOf": [{"type": "string"}, {"type": "null"}]}}}',
                       '{"a": 1}'),
    ('oneOf inside',   '{"properties": {"a": {"oneOf": [{"minimum": 0}, {"maximum": 10}]}}}',
                       '{"a": 5}'),
    ('example transfer', '{"type": "object", "required": ["to", "amount"], "additionalProperties": false, "properties": {"to": {"type": "string", "minLength": 1}, "amount": {"type": "integer", "exclusiveMinimum": 0}, "memo": {"type": ["string", "null"], "maxLength": 140}}}',
                       '{"to": "acct-1", "amount": 250, "memo": null}'),
    ('example transfer bad', '{"type": "object", "required": ["to", "amount"], "additionalProperties": false, "properties": {"to": {"type": "string", "minLength": 1}, "amount": {"type": "integer", "exclusiveMinimum": 0}, "memo": {"type": ["string", "null"], "maxLength": 140}}}',
                       '{"to": "acct-1", "amount": 0}')
) AS t(label, schema, instance);

-- Unsupported keywords are refused with the path of the schema object where they appear.
SELECT label, try(format('SELECT cscp.jsonschema_check(%L)', schema)) AS result FROM (VALUES
    ('$ref at root',               '{"$ref": "#/$defs/x"}'),
    ('format in properties',       '{"properties": {"email": {"type": "string", "format": "email"}}}'),
    ('patternProperties',          '{"type": "object", "patternProperties": {"^x": {}}}'),
    ('if in items',                '{"items": {"if": {"type": "string"}, "then": {"minLength": 1}}}'),
    ('$defs',                      '{"$defs": {"x": {}}}'),
    ('in allOf element',           '{"allOf": [{}, {"dependentRequired": {}}]}'),
    ('in additionalProperties',    '{"additionalProperties": {"contains": {}}}'),
    ('in not',                     '{"not": {"multipleOf": 2}}'),
    ('quoted path',                '{"properties": {"a b": {"minContains": 1}}}'),
    ('typo',                       '{"requird": ["a"]}')
) AS t(label, schema);

-- The hint lists what is supported.
DO $$
BEGIN
    PERFORM cscp.jsonschema_check('{"format": "date"}');
EXCEPTION WHEN invalid_parameter_value THEN
    DECLARE
        hint text;
    BEGIN
        GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
        RAISE NOTICE 'hint: %', hint;
    END;
END
$$;

-- Malformed keyword values are refused too.
SELECT label, try(format('SELECT cscp.jsonschema_check(%L)', schema)) AS result FROM (VALUES
    ('schema a string',            '"object"'),
    ('schema an array',            '[{}]'),
    ('schema null',                'null'),
    ('properties value not schema', '{"properties": {"a": 1}}'),
    ('properties not object',      '{"properties": [{"a": {}}]}'),
    ('type unknown name',          '{"type": "int"}'),
    ('type number',                '{"type": 1}'),
    ('type empty array',           '{"type": []}'),
    ('type duplicate',             '{"type": ["string", "string"]}'),
    ('type array with unknown',    '{"type": ["string", "date"]}'),
    ('required not array',         '{"required": "a"}'),
    ('required not strings',       '{"required": ["a", 1]}'),
    ('required duplicate',         '{"required": ["a", "a"]}'),
    ('minLength negative',         '{"minLength": -1}'),
    ('minLength fraction',         '{"minLength": 1.5}'),
    ('maxLength string',           '{"maxLength": "5"}'),
    ('minItems null',              '{"minItems": null}'),
    ('maxItems negative',          '{"properties": {"a": {"maxItems": -2}}}'),
    ('minimum string',             '{"minimum": "0"}'),
    ('maximum null',               '{"maximum": null}'),
    ('exclusiveMinimum boolean',   '{"exclusiveMinimum": true}'),
    ('exclusiveMaximum boolean',   '{"exclusiveMaximum": false}'),
    ('uniqueItems string',         '{"uniqueItems": "yes"}'),
    ('pattern not string',         '{"pattern": 5}'),
    ('pattern invalid',            '{"pattern": "(unclosed"}'),
    ('pattern invalid nested',     '{"items": {"pattern": "a{2,1}"}}'),
    ('enum not array',             '{"enum": "a"}'),
    ('items array form',           '{"items": [{"type": "string"}]}'),
    ('additionalProperties string', '{"additionalProperties": "no"}'),
    ('not a number',               '{"not": 1}'),
    ('allOf empty',                '{"allOf": []}'),
    ('anyOf not array',            '{"anyOf": {}}'),
    ('oneOf element not schema',   '{"oneOf": [{}, "x"]}')
) AS t(label, schema);

-- jsonschema_validate checks the schema first, whatever the instance.
SELECT try($$SELECT cscp.jsonschema_validate('{"format": "email"}', '"a@b"')$$);
SELECT try($$SELECT cscp.jsonschema_validate('{"minLength": -1}', '1')$$);

-- NULL arguments.
SELECT try($$SELECT cscp.jsonschema_check(NULL)$$);
SELECT try($$SELECT cscp.jsonschema_validate(NULL, '1')$$);
SELECT try($$SELECT cscp.jsonschema_validate('{}', NULL)$$);
SELECT try($$SELECT cscp.jsonschema_validate(NULL, NULL)$$);
SELECT cscp.jsonschema_validate('{"type": "null"}', 'null') IS NULL AS json_null_is_valid;

-- Declared immutable, parallel safe and not strict; nothing granted to PUBLIC.
SELECT proname, provolatile, proparallel, proisstrict,
       has_function_privilege('public', oid, 'EXECUTE') AS public_execute,
       obj_description(oid, 'pg_proc') IS NOT NULL AS commented
FROM pg_proc WHERE pronamespace = 'cscp'::regnamespace AND proname LIKE 'jsonschema%'
ORDER BY proname;
