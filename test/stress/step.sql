-- pgbench: one cscp API call per transaction, chosen at random (test/stress/harness.sql).
\set op random(1, 27)
SELECT stress.step(:op, :client_id);
