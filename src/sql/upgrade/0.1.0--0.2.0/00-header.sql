-- cscp upgrade script 0.1.0 -> 0.2.0, concatenated from src/sql/upgrade/0.1.0--0.2.0/*.sql in
-- name order by the Makefile.  Each schema change of 0.2.0 adds its step here as it lands, in a
-- file of its own (NN-topic.sql); 90-grants.sql runs last and re-grants roles granted by 0.1.0.
-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION cscp UPDATE TO '0.2.0'" to load this file. \quit
