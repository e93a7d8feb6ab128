-- Routing-ready ids: the first 32 bits of a context id are hashtext(conversation_id).
SET cscp.clock = '2026-03-01 09:00:00+00';
SELECT conv, cscp.routing_hash((cscp.context_open('t', conv, 'a')).context_id) = hashtext(conv) AS carries_hash
  FROM unnest(ARRAY['c-1', 'whatsapp:+15550001', 'a much longer conversation identifier', 'ü-ñ']) conv;

SELECT cscp.routing_hash(cscp.routing_id('c-1')) = hashtext('c-1') AS routing_id_carries_hash;
SELECT cscp.routing_id('c-1') <> cscp.routing_id('c-1') AS ids_are_unique;
SELECT substr(cscp.routing_id('c-1')::text, 15, 1) AS uuid_version;

-- A direct INSERT gets a routed id when it gives none, and is refused with a wrong one.
INSERT INTO cscp.context (tenant_id, conversation_id, actor_id, expires_at, ttl)
VALUES ('t', 'direct-1', 'a', cscp.now() + interval '1 hour', interval '1 hour');
SELECT cscp.routing_hash(context_id) = hashtext(conversation_id) AS routed
  FROM cscp.context WHERE conversation_id = 'direct-1';
SELECT try($$INSERT INTO cscp.context (tenant_id, context_id, conversation_id, actor_id, expires_at, ttl)
             VALUES ('t', '00000000-0000-4000-8000-000000000000', 'direct-2', 'a',
                     cscp.now() + interval '1 hour', interval '1 hour')$$);
SELECT count(*) FROM cscp.context WHERE conversation_id = 'direct-2';
SELECT try($$SELECT cscp.routing_id(NULL)$$);
SELECT try($$SELECT cscp.routing_id('')$$);
