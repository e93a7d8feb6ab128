# cscp: PGXS build, plus the two entry points of README: `make demo` and `make test`.
#
# The bootstrap targets (deps, demo, test, bench) must work on a machine where PostgreSQL's
# headers and pg_config are not installed yet, so PGXS is included only when it exists; the
# targets that need it re-invoke make once `deps` has installed it.

EXTENSION  = cscp
EXTVERSION := $(shell sed -n "s/^default_version *= *'\(.*\)'/\1/p" cscp.control)
PGVERSION  = 15

# `make test PG=18` (or PG=17, any goals): the same goals in a Debian root carrying that
# PostgreSQL, set up on first use and reused (test/scripts/pgversion.sh). PG=15 is this machine.
PG ?= $(PGVERSION)
ifneq ($(PG),$(PGVERSION))
.PHONY: $(or $(MAKECMDGOALS),all)
$(firstword $(MAKECMDGOALS) all):
	@bash test/scripts/pgversion.sh $(PG) $(MAKECMDGOALS)
$(wordlist 2,$(words $(MAKECMDGOALS)),$(MAKECMDGOALS)):
	@:
else

MODULE_big = cscp
OBJS = \
	src/cscp.o \
	src/clock.o \
	src/args.o \
	src/tenancy.o \
	src/inspect.o \
	src/jsonutil.o \
	src/jsonschema.o \
	src/policy.o \
	src/registry.o \
	src/lifetime.o \
	src/routing.o \
	src/slots.o \
	src/enums.o \
	src/rowguard.o \
	src/canonical.o \
	src/evidence.o \
	src/context_fsm.o \
	src/context_api.o \
	src/document.o \
	src/command_fsm.o \
	src/frame.o \
	src/command_api.o \
	src/confirm.o \
	src/answer.o \
	src/approve.o \
	src/spiplan.o \
	src/events.o \
	src/context_link.o \
	src/turns.o \
	src/turn_guard.o \
	src/conversation_fsm.o \
	src/conversation_api.o \
	src/message_turn.o \
	src/identity.o \
	src/facts.o \
	src/assemble.o \
	src/owner.o \
	src/forget.o \
	src/sweep.o \
	src/worker.o \
	src/shard.o \
	src/keys.o \
	src/http_api.o

# The install script is concatenated from one file per concern, in this order.
SQL_PARTS = \
	src/sql/schema.sql \
	src/sql/types.sql \
	src/sql/helpers.sql \
	src/sql/jsonschema.sql \
	src/sql/policy.sql \
	src/sql/keys.sql \
	src/sql/context.sql \
	src/sql/evidence.sql \
	src/sql/command.sql \
	src/sql/confirm.sql \
	src/sql/document.sql \
	src/sql/conversation.sql \
	src/sql/facts.sql \
	src/sql/registry.sql \
	src/sql/sweep.sql \
	src/sql/views.sql \
	src/sql/invariants.sql \
	src/sql/forget.sql \
	src/sql/shard.sql \
	src/sql/gateway.sql \
	src/sql/security.sql

# Upgrade scripts: one folder per version step, src/sql/upgrade/A--B/, whose files are
# concatenated in name order into cscp--A--B.sql; every step found is built and installed.
UPGRADE_STEPS = $(notdir $(wildcard src/sql/upgrade/*--*))
UPGRADE_SCRIPTS = $(patsubst %,$(EXTENSION)--%.sql,$(UPGRADE_STEPS))
DATA_built = $(EXTENSION)--$(EXTVERSION).sql $(UPGRADE_SCRIPTS)
EXTRA_CLEAN = results output_iso regression.diffs regression.out

REGRESS = setup clock routing policy lifetimes context_transitions context_expiry context_live context_retired slots jsonschema jsonschema_limits confirm confirm_binding bad_input_commands commands command_lists command_registry governance snapshot_rules snapshot_paths refused_steps recovery_risk evidence documents facts build_context sweep views bad_input conversations bad_input_conversations row_rules message_turn shard invariants forget executor_path internal_calls gateway gateway_contexts gateway_facts gateway_conversations statebench drop
REGRESS_OPTS = --inputdir=. --load-extension=$(EXTENSION)
ISOLATION = context_open_race sweep_vs_slot_set submit_same_key confirm_race sweep_vs_confirm confirm_vs_new_request notify policy_cache conversation_append_race conversation_same_message conversation_timeout_race fact_supersede_race
ISOLATION += fact_chain_walk fact_same_key_race authorize_release transition_race doc_put_race
ISOLATION += tenant_binding_cache turn_validation_lock forget_isolation fact_authority_race
ISOLATION += yes_vs_new_question yes_vs_context_expiry one_question_race conversation_close_race
ISOLATION += step_vs_context_close gateway_last_use
ISOLATION += gated_cancel_race
ISOLATION_OPTS = --inputdir=test/isolation --load-extension=$(EXTENSION)

PG_CPPFLAGS = -I$(srcdir)/src
# -Wno-unused-parameter: PostgreSQL 15's own storage/bufpage.h trips it; nothing else is relaxed.
PG_CFLAGS = -Wall -Wextra -Werror -Wno-unused-parameter

PG_CONFIG ?= $(firstword $(wildcard /usr/lib/postgresql/$(PGVERSION)/bin/pg_config) $(shell command -v pg_config 2>/dev/null))
ifneq ($(strip $(PG_CONFIG)),)
PGXS := $(shell $(PG_CONFIG) --pgxs 2>/dev/null)
endif

ifneq ($(wildcard $(PGXS)),)
include $(PGXS)
else
all install installcheck:
	@echo "PostgreSQL $(PGVERSION) server headers (PGXS) are not installed." >&2
	@echo "Run 'make deps' (as root) first, or 'make demo' / 'make test', which do it for you." >&2
	@exit 1
endif

.DEFAULT_GOAL := all

# The proxy extension (proxy/): installed with cscp, so a proxy database can CREATE EXTENSION
# cscp_proxy; `make proxy-sql` regenerates its install script from cscp and proxy/api.tsv.
.PHONY: install-proxy proxy-sql bench-proxy
install: install-proxy
install-proxy:
	@$(MAKE) --no-print-directory -C proxy install PG_CONFIG="$(PG_CONFIG)"
proxy-sql:
	@bash proxy/generate.sh proxy/cscp_proxy--0.1.0.sql

# The message-turn workload through the proxy on two shards against one node (pgbench, about
# 2.5 minutes on throwaway clusters); not part of `make test`.
bench-proxy: build
	@bash test/scripts/bench_proxy.sh

# PGXS tracks no header dependencies: every object depends on the one shared header.
$(OBJS): src/cscp.h

$(EXTENSION)--$(EXTVERSION).sql: $(SQL_PARTS) cscp.control
	cat $(SQL_PARTS) > $@

.SECONDEXPANSION:
$(UPGRADE_SCRIPTS): $(EXTENSION)--%.sql: $$(sort $$(wildcard src/sql/upgrade/%/*.sql))
	cat $^ > $@

.PHONY: deps build demo test bench bench-facts bench-aa statebench check-all
# Install what is missing from Debian's packages (PostgreSQL 15 server and headers, pgTAP, pg_prove).
deps:
	@bash test/scripts/deps.sh

# Build and install the extension, in a fresh make so that PGXS is read after deps installed it.
build: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory install

# A throwaway cluster and a walk through realistic conversations, then the bots' scenario through
# curl against the HTTPS gateway; the build's output goes to log/demo/build.log.
demo:
	@MAKE="$(MAKE)" bash test/scripts/demo.sh

# Every suite, one line each (test/scripts/run-tests.sh); TEST_ORDER=shuffle [TEST_SEED=N] runs
# them, and the tests inside them, in a random order.
test:
	@MAKE="$(MAKE)" TEST_ORDER="$(TEST_ORDER)" TEST_SEED="$(TEST_SEED)" TEST_JOBS="$(TEST_JOBS)" bash test/scripts/run-tests.sh

# Issue 6's workloads W1-W6 through cscp against plain SQL (the floor) and hand-written PL/pgSQL
# (naive) on a throwaway cluster (pgbench; about 40 minutes); not part of `make test`.
# BENCH_ONLY=W1,W3 runs a subset, BENCH_SECONDS and BENCH_RUNS shorten it (test/scripts/bench.sh).
bench: build
	@bash test/scripts/bench.sh

# W4 alone: build_context with 100,000 superseded facts against 1,000 valid ones, and
# fact_current on a chain of 101 (about 4 minutes).
bench-facts: build
	@BENCH_ONLY=W4 bash test/scripts/bench.sh

# An A/A test of the benchmark's pairs: two identical W1 runs in a row, six times; the ratios
# show the noise and the cost of coming second (about 3 minutes).
bench-aa: build
	@bash test/scripts/bench_aa.sh

# Instructions per transaction of W1 and W2 through cscp and the floor, counted by callgrind in
# the backend that runs them: a cost that does not move with the machine's load (about 5 minutes).
.PHONY: bench-instructions
bench-instructions: build
	@bash test/scripts/bench_instructions.sh

# StateBench timelines replayed through cscp on a throwaway cluster, reported per track
# (test/statebench/); not part of `make test`: the data is not part of the project.
#   make statebench STATEBENCH=path/to/train.jsonl
statebench: build
	@bash test/statebench/run.sh "$(STATEBENCH)"

# The HTTPS gateway (gateway/, issue 33): libmicrohttpd with GnuTLS, and libpq; needs no server
# headers, so it builds before PGXS exists.
.PHONY: gateway demo-http
gateway: deps
	@$(MAKE) --no-print-directory -C gateway

# The specification's multi-bot scenario through curl against the gateway over HTTPS.
demo-http: build gateway
	@bash test/scripts/gateway-demo.sh
EXTRA_CLEAN += gateway/cscp-gateway gateway/*.o gateway/openapi.c

# The gateway's document endpoints over HTTPS (wrk) beside the same calls through libpq (pgbench)
# and beside /healthz, at 4 and 16 connections (about 3 minutes); not part of `make test`.
.PHONY: bench-http
bench-http: build gateway
	@bash test/scripts/bench_http.sh

# Issue 7: crash test, stress, fuzz (test/crash/, test/stress/, test/fuzz/).
.PHONY: crashtest
LIBPQ_CFLAGS = -Wall -Wextra -Werror -O2 -I$(shell $(PG_CONFIG) --includedir)
LIBPQ_LIBS = -L$(shell $(PG_CONFIG) --libdir) -lpq
test/crash/crash_client: test/crash/crash_client.c
	$(CC) $(LIBPQ_CFLAGS) -o $@ $< $(LIBPQ_LIBS)
EXTRA_CLEAN += test/crash/crash_client

# Acknowledged writes survive SIGKILL of the postmaster (test/scripts/crash.sh); a short form
# (3 crashes) runs inside `make test`.
#   make crashtest CRASH_KILLS=10 CRASH_CLIENTS=8 CRASH_SEED=...
crashtest: build
	@CRASH_KILLS=$(or $(CRASH_KILLS),10) CRASH_CLIENTS=$(or $(CRASH_CLIENTS),8) bash test/scripts/crash.sh

test/fuzz/fuzz_sql: test/fuzz/fuzz_sql.c
	$(CC) $(LIBPQ_CFLAGS) -o $@ $< $(LIBPQ_LIBS)
EXTRA_CLEAN += test/fuzz/fuzz_sql

# Every function of schema cscp with random and adversarial arguments (test/scripts/fuzz.sh); a
# short form (3,000 calls) runs inside `make test`.
#   make fuzz FUZZ_CALLS=100000 FUZZ_SEED=...
.PHONY: fuzz
fuzz: build
	@FUZZ_CALLS=$(or $(FUZZ_CALLS),30000) FUZZ_SEED=$(or $(FUZZ_SEED),20261121) bash test/scripts/fuzz.sh

# 16 pgbench clients mixing every API call for 60 s, then check_invariants() (test/scripts/stress.sh);
# not part of `make test`.
.PHONY: stress
stress: build
	@bash test/scripts/stress.sh

# cscp built with -DUSE_ASSERT_CHECKING, then pg_regress and the isolation specs against it
# (test/scripts/check-assert.sh, about 2 minutes); and the regression suite with the server under
# valgrind's memcheck, failing on an error in cscp's code (test/scripts/valgrind.sh, about 10 minutes).
.PHONY: check-assert valgrind
check-assert:
	@MAKE="$(MAKE)" bash test/scripts/check-assert.sh
valgrind:
	@MAKE="$(MAKE)" bash test/scripts/valgrind.sh

endif # PG
