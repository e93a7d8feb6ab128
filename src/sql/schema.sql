-- cscp install script, concatenated from src/sql/*.sql by the Makefile.
-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION cscp" to load this file. \quit

-- The schema is created here, not by CREATE EXTENSION, so it is a member of the extension
-- and DROP EXTENSION cscp leaves nothing behind.
CREATE SCHEMA cscp;
COMMENT ON SCHEMA cscp IS 'cscp: conversation state and context persistence';

