-- `make bench-facts`: context for the subject with the same 1,000 valid facts and 100,000
-- superseded ones, 1,000 chains of 101 (test/bench/facts_setup.sql).
\set topic random(1, 50)
SELECT cscp.build_context('bench', 'superseded', 's1', 'value topic ' || :topic, 2000);
