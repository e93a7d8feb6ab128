\i sql/include/helpers.sql
-- cscp.now(): statement_timestamp() unless the superuser-only cscp.clock pins it.
SET timezone = 'UTC';
CREATE ROLE clock_app LOGIN;
GRANT USAGE ON SCHEMA cscp TO clock_app;
GRANT EXECUTE ON FUNCTION cscp.now() TO clock_app;

-- Unpinned: the statement's start time.
SELECT cscp.now() = statement_timestamp() AS follows_statement_timestamp;

-- Pinned.
SET cscp.clock = '2026-03-01 09:30:00+00';
SELECT cscp.now();
SET cscp.clock = '2026-03-01 09:30:00.5+01';
SELECT cscp.now();
RESET cscp.clock;
SELECT cscp.now() = statement_timestamp() AS follows_statement_timestamp;

-- Not a timestamp: refused, nothing changes.
SET cscp.clock = 'tomorrow-ish';
SET cscp.clock = 'infinity';
SHOW cscp.clock;

-- An application role may not move the clock, nor pin it for itself.
SET ROLE clock_app;
SET cscp.clock = '2000-01-01 00:00:00+00';
SELECT set_config('cscp.clock', '2000-01-01 00:00:00+00', false);
SELECT cscp.now() = statement_timestamp() AS still_real_time;
RESET ROLE;
ALTER ROLE clock_app SET cscp.clock = '2000-01-01 00:00:00+00';
SET ROLE clock_app;
ALTER ROLE clock_app SET cscp.clock = '2000-01-01 00:00:00+00';
RESET ROLE;

-- Nor by setting it before cscp's library is loaded in a fresh session: when the library
-- loads, the placeholder is checked against the real setting's privilege and dropped.
\c - clock_app
SET cscp.clock = '2000-01-01 00:00:00+00';
SELECT cscp.now() = statement_timestamp() AS placeholder_ignored, current_setting('cscp.clock') AS clock;
\c - postgres

-- Unknown settings under the reserved prefix are refused.
SET cscp.no_such_setting = 1;

DROP OWNED BY clock_app;
ALTER ROLE clock_app RESET ALL;
DROP ROLE clock_app;
