-- `make bench-facts`: context for the subject with 1,000 valid facts alone (test/bench/facts_setup.sql).
\set topic random(1, 50)
SELECT cscp.build_context('bench', 'valid-only', 's1', 'value topic ' || :topic, 2000);
