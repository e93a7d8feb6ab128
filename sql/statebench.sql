\i sql/include/helpers.sql
-- The StateBench harness (test/statebench/replay.sql) on four small timelines written for it:
-- supersession by key and by id, environment updates, the text markers in both modes, and its
-- classification of each resurrection by the data's own state ("needs reasoning" when every
-- leaked phrase also occurs in an item the data leaves valid; otherwise the data says invalid).
\set ECHO none
\i test/statebench/replay.sql
\set ECHO all

-- sb-keys: supersedes names a key (the new fact has a new key) and an id.
INSERT INTO statebench.raw VALUES ($${"id": "sb-keys", "track": "supersession",
  "initial_state": {"identity_role": {"user_name": "Ana", "authority": "peer"},
    "persistent_facts": [{"id": "F-PRICE", "key": "unit_price", "value": "$100 per unit",
                          "source": {"type": "user", "authority": "peer"}, "scope": "global"}],
    "working_set": [], "environment": {"now": "2025-12-01T09:00:00"}},
  "events": [
    {"ts": "2025-12-01T09:01:00", "type": "supersession", "writes": [{"id": "W-AUTO", "layer": "persistent_facts",
      "key": "unit_price_v2", "value": "$80 per unit", "source": {"type": "user", "authority": "peer"},
      "scope": "global", "supersedes": "unit_price"}]},
    {"ts": "2025-12-01T09:02:00", "type": "state_write", "writes": [{"id": "F-PLAN-1", "layer": "persistent_facts",
      "key": "plan", "value": "plan Alpha", "source": {"type": "user", "authority": "peer"}, "scope": "global"}]},
    {"ts": "2025-12-01T09:03:00", "type": "supersession", "writes": [{"id": "F-PLAN-2", "layer": "persistent_facts",
      "key": "plan_v2", "value": "plan Beta", "source": {"type": "user", "authority": "peer"},
      "scope": "global", "supersedes": "F-PLAN-1"}]},
    {"ts": "2025-12-01T09:04:00", "type": "query", "prompt": "What price and plan?",
     "ground_truth": {"must_mention": ["$80", "plan Beta"], "must_not_mention": ["$100", "Alpha"]}}]}$$);

-- sb-reason: "15%" is in a valid policy as well as in the revoked approval: needs reasoning.
INSERT INTO statebench.raw VALUES ($${"id": "sb-reason", "track": "supersession",
  "initial_state": {"identity_role": null,
    "persistent_facts": [{"id": "F-POL", "key": "discount_policy", "value": "Max 15% discount without VP approval",
                          "source": {"type": "policy", "authority": "peer"}, "scope": "global"}],
    "working_set": [], "environment": {"now": "2025-12-01T09:00:00"}},
  "events": [
    {"ts": "2025-12-01T09:01:00", "type": "state_write", "writes": [{"id": "W-AUTO", "layer": "persistent_facts",
      "key": "acme_discount", "value": "15% discount approved for Acme", "source": {"type": "user", "authority": "peer"},
      "scope": "global"}]},
    {"ts": "2025-12-01T09:02:00", "type": "supersession", "writes": [{"id": "W-AUTO", "layer": "persistent_facts",
      "key": "acme_discount_v2", "value": "discount for Acme revoked", "source": {"type": "user", "authority": "peer"},
      "scope": "global", "supersedes": "acme_discount"}]},
    {"ts": "2025-12-01T09:03:00", "type": "query", "prompt": "Can Acme get the discount?",
     "ground_truth": {"must_mention": ["revoked"], "must_not_mention": ["15%|approved for Acme"]}}]}$$);

-- sb-markers: a what-if working-set item, a restricted fact and an invalidated conclusion, told
-- in mode raw (the data says invalid: a fault) and never in mode markers.
INSERT INTO statebench.raw VALUES ($${"id": "sb-markers", "track": "scope_leak",
  "initial_state": {"identity_role": {"user_name": "Bo", "authority": "peer"},
    "persistent_facts": [{"id": "F-SAL", "key": "salary_band", "value": "[RESTRICTED: HR only] Band 7 pays 90k",
                          "source": {"type": "system", "authority": "system"}, "scope": "global"},
                         {"id": "F-OLD", "key": "launch", "value": "[INVALIDATED - was based on wrong data] launch in March",
                          "source": {"type": "user", "authority": "peer"}, "scope": "global"}],
    "working_set": [{"content": "[SCOPE: what-if discussion] budget of 2M", "item_type": "note"}],
    "environment": {"now": "2025-12-01T09:00:00"}},
  "events": [
    {"ts": "2025-12-01T09:03:00", "type": "query", "prompt": "What is the budget, the salary band and the launch?",
     "ground_truth": {"must_mention": [], "must_not_mention": ["2M", "90k", "regex:launch in marc?h"]}}]}$$);

-- sb-env: an environment key updated; a "#" phrase that only cscp's headings would match.
INSERT INTO statebench.raw VALUES ($${"id": "sb-env", "track": "environmental_freshness",
  "initial_state": {"identity_role": null, "persistent_facts": [], "working_set": [],
    "environment": {"now": "2025-12-01T09:00:00", "deadline": "renews in 30 days"}},
  "events": [
    {"ts": "2025-12-01T09:01:00", "type": "state_write", "writes": [{"id": "W-AUTO", "layer": "environment",
      "key": "deadline", "value": "renews TOMORROW", "source": {"type": "user", "authority": "peer"}, "scope": "global"}]},
    {"ts": "2025-12-01T09:02:00", "type": "query", "prompt": "When does it renew?",
     "ground_truth": {"must_mention": ["TOMORROW"], "must_not_mention": ["30 days", "#"]}}]}$$);

SELECT statebench.replay_all(4000) AS timelines_replayed;
SELECT mode, timeline_id, query_no, resurrection, leak_valid AS needs_reasoning,
       resurrection AND NOT leak_valid AS data_says_invalid, leaked, all_mentioned, missing,
       stale_told, told_invalid
  FROM statebench.result ORDER BY timeline_id, mode DESC, query_no;
-- The data's own state the verdicts rest on (the same in both modes).
SELECT timeline_id, layer, key, txt, invalid, out_of_scope
  FROM statebench.item WHERE mode = 'markers' AND layer <> 'identity' ORDER BY timeline_id, seq;
SELECT count(*) AS refused FROM statebench.refusal;

-- The harness leaves nothing of its own behind (drop.sql counts functions mentioning cscp).
SET client_min_messages = warning;
DROP SCHEMA statebench CASCADE;
RESET client_min_messages;
