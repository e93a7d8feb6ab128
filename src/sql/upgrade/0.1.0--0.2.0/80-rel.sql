-- No migration logic in the install script: cscp._grant_app_privileges no longer speaks of
-- roles granted by earlier versions (it takes back what a role was granted by hand beyond the
-- API, whatever granted it); only its comments changed.
CREATE OR REPLACE FUNCTION cscp._grant_app_privileges(r regrole) RETURNS void
LANGUAGE plpgsql VOLATILE
AS $$
BEGIN
    EXECUTE format('GRANT USAGE ON SCHEMA cscp TO %s', r);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON cscp.context, cscp.document, cscp.policy TO %s', r);
    -- Which context is live, and when each retired, is written by the context triggers as their owner.
    EXECUTE format('GRANT SELECT ON cscp.context_live, cscp.context_retired TO %s', r);
    -- Commands change only by transitions (no DELETE); frames are written once; answers are
    -- read-only: cscp.confirm and cscp.approve write them as their owner (a yes confirms a
    -- command only with its answer recorded, so no role below the owner may forge one); a
    -- role granted more by hand loses INSERT on them.  Evidence is read-only: the trigger and
    -- cscp._evidence_refusal write it as its owner.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON cscp.command TO %s', r);
    EXECUTE format('GRANT SELECT ON cscp.command_window, cscp.command_retired TO %s', r);
    EXECUTE format('GRANT SELECT, INSERT ON cscp.frame TO %s', r);
    EXECUTE format('GRANT SELECT ON cscp.answer TO %s', r);
    EXECUTE format('REVOKE INSERT, UPDATE, DELETE, TRUNCATE ON cscp.answer FROM %s', r);
    EXECUTE format('GRANT SELECT ON cscp.evidence TO %s', r);
    -- Conversations change only through their turns (the triggers see to it; UPDATE is needed
    -- for the row lock every append takes); turns are written once; events are read-only.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON cscp.conversation TO %s', r);
    EXECUTE format('GRANT SELECT, INSERT ON cscp.turn TO %s', r);
    EXECUTE format('GRANT SELECT ON cscp.event TO %s', r);
    -- Facts are replaced, not deleted, by the application; identities are replaced, not deleted.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE ON cscp.fact, cscp.identity TO %s', r);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON cscp.authority, cscp.working_set, '
                   'cscp.environment TO %s', r);
    -- LangGraph's checkpoints and store, agent sessions (checkpoint.sql): the application's own.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON cscp.checkpoint_thread, cscp.checkpoint, '
                   'cscp.checkpoint_blob, cscp.checkpoint_write, cscp.store_item, cscp.agent_session, '
                   'cscp.session_item TO %s', r);
    -- The command registry, like the policy (registry.sql); its governance log is not the app's.
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON cscp.command_registry TO %s', r);
    -- The public API only: no internal (_-prefixed) function, which an application could
    -- otherwise call with arguments cscp never passes, and no trigger function.  A role
    -- granted more by hand (GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA cscp) loses the
    -- internal ones.
    EXECUTE (SELECT format('GRANT EXECUTE ON FUNCTION %s TO %s', string_agg(p.oid::regprocedure::text, ', '), r)
               FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname !~ '^(_|http_)'
                AND p.prorettype <> 'pg_catalog.trigger'::regtype);
    -- Nor the gateway's endpoints (cscp.grant_gateway's): a key passed to them would act for its
    -- tenant whatever tenants the role is bound to.
    EXECUTE (SELECT format('REVOKE EXECUTE ON FUNCTION %s FROM %s', string_agg(p.oid::regprocedure::text, ', '), r)
               FROM pg_catalog.pg_proc p
              WHERE p.pronamespace = 'cscp'::regnamespace AND p.proname ~ '^(_|http_)');
    -- Administration and operator inspection are not the application's.
    EXECUTE format('REVOKE EXECUTE ON FUNCTION cscp.grant_app(name, text[]), cscp.grant_operator(name, text[]), '
                   'cscp.revoke_app(name), cscp.revoke_operator(name), cscp.grant_gateway(name), '
                   'cscp.api_key_create(text, text, text[], timestamptz, text), cscp.api_key_revoke(text, text), '
                   'cscp.authority_bind(text, name, text), '
                   'cscp.show_active_context(text, text), cscp.inspect_active_context(text, text), '
                   'cscp.inspect_command_lifecycle(text, text), cscp.check_invariants(text) FROM %s', r);
    -- Nor a shard's place in a scale-out deployment (shard.sql).
    EXECUTE format('REVOKE EXECUTE ON FUNCTION cscp.shard_set(int, int[]), cscp.shard_misplaced() FROM %s', r);
END
$$;
