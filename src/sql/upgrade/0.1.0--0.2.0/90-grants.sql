
-- Last step: roles granted by 0.1.0 get what 0.2.0 grants them, new functions and tables
-- included, exactly as cscp.grant_app, cscp.grant_operator and cscp.grant_gateway would now.
SELECT cscp._grant_app_privileges(b.role) FROM cscp.tenant_binding b WHERE b.kind = 'app';
SELECT cscp._grant_operator_privileges(b.role) FROM cscp.tenant_binding b WHERE b.kind = 'operator';
