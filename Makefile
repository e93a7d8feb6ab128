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
	src/shared/args.o \
	src/shared/canonical.o \
	src/shared/clock.o \
	src/shared/cscp.o \
	src/shared/enums.o \
	src/shared/jsonschema.o \
	src/shared/jsonutil.o \
	src/shared/keys.o \
	src/shared/lifetime.o \
	src/shared/owner.o \
	src/shared/policy.o \
	src/shared/routing.o \
	src/shared/rowguard.o \
	src/shared/spiplan.o \
	src/shared/tenancy.o \
	src/context/context_api.o \
	src/context/context_fsm.o \
	src/context/context_link.o \
	src/context/slots.o \
	src/command/answer.o \
	src/command/approve.o \
	src/command/command_api.o \
	src/command/command_fsm.o \
	src/command/confirm.o \
	src/command/evidence.o \
	src/command/frame.o \
	src/command/registry.o \
	src/conversation/conversation_api.o \
	src/conversation/conversation_fsm.o \
	src/conversation/events.o \
	src/conversation/message_turn.o \
	src/conversation/turn_guard.o \
	src/conversation/turns.o \
	src/facts/assemble.o \
	src/facts/facts.o \
	src/facts/identity.o \
	src/document/document.o \
	src/document/http_api.o \
	src/operations/forget.o \
	src/operations/inspect.o \
	src/operations/shard.o \
	src/operations/sweep.o \
	src/operations/worker.o

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
	src/sql/checkpoint.sql \
	src/sql/security.sql

# Upgrade scripts: src/sql/upgrade/cscp--A--B.sql, one per version step, every one installed.
DATA = $(wildcard src/sql/upgrade/$(EXTENSION)--*--*.sql)
DATA_built = $(EXTENSION)--$(EXTVERSION).sql
EXTRA_CLEAN = results output_iso regression.diffs regression.out

# The suites by glob: a new sql/NAME.sql (with expected/NAME.out) or test/isolation/specs/NAME.spec
# needs no edit here.  Each suite includes the helpers it shares with the others
# (sql/include/helpers.sql), so any one runs alone (make installcheck REGRESS=NAME; make test's
# regress-alone runs each so); setup (which checks them) runs first and drop (DROP EXTENSION,
# then cscp again) last; run-tests.sh shuffles the others.
REGRESS = setup $(filter-out setup drop,$(patsubst sql/%.sql,%,$(sort $(wildcard sql/*.sql)))) drop
REGRESS_OPTS = --inputdir=. --load-extension=$(EXTENSION)
ISOLATION = $(patsubst test/isolation/specs/%.spec,%,$(sort $(wildcard test/isolation/specs/*.spec)))
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

# The proxy extension (proxy/): `make install` installs cscp alone; `make install-proxy` installs
# cscp_proxy, so that a proxy database can CREATE EXTENSION cscp_proxy (`make build` does both, for
# the scale-out suites); `make proxy-sql` regenerates its install script from cscp and proxy/api.tsv.
.PHONY: install-proxy proxy-sql bench-proxy
install-proxy:
	@$(MAKE) --no-print-directory -C proxy install PG_CONFIG="$(PG_CONFIG)"
proxy-sql:
	@bash proxy/generate.sh proxy/cscp_proxy--0.1.0.sql

# The message-turn workload through the proxy on two shards against one node (pgbench, about
# 2.5 minutes on throwaway clusters); not part of `make test`.
bench-proxy: build
	@bash test/scripts/bench_proxy.sh

# PGXS tracks no header dependencies: every object depends on the one shared header.
$(OBJS): src/cscp.h src/pgcompat.h $(wildcard src/*/*.h)

$(EXTENSION)--$(EXTVERSION).sql: $(SQL_PARTS) cscp.control
	cat $(SQL_PARTS) > $@

.PHONY: deps build demo test bench bench-facts bench-aa statebench
# Install what is missing from Debian's packages (PostgreSQL 15 server and headers, pgTAP, pg_prove).
deps:
	@bash test/scripts/deps.sh

# Build and install the extension and the proxy extension, in a fresh make so that PGXS is read
# after deps installed it.
build: deps
	@$(MAKE) --no-print-directory all
	@$(MAKE) --no-print-directory install install-proxy

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

# A LangGraph StateGraph turn through CscpSaver and through LangGraph's PostgresSaver on one
# throwaway cluster, alternated, at turns 1-50 and 201-250 with 1, 4 and 16 threads: turns per
# second, p99, WAL bytes per turn (test/scripts/bench_langgraph.sh); not part of `make test`.
.PHONY: bench-langgraph
bench-langgraph: build
	@bash test/scripts/bench_langgraph.sh

# W4 alone: build_context with 100,000 superseded facts against 1,000 valid ones, and
# fact_current on a chain of 101 (about 4 minutes).
bench-facts: build
	@BENCH_ONLY=W4 bash test/scripts/bench.sh

# An A/A test of the benchmark's pairs: two identical W1 runs in a row, six times; the ratios
# show the noise and the cost of coming second (about 3 minutes).
bench-aa: build
	@bash test/scripts/bench_aa.sh

# Instructions per transaction of W1, W2 and the confirmation path as a role bound to one tenant
# (C) through cscp and the floor, counted by callgrind in the backend that runs them: a cost that
# does not move with the machine's load (about 8 minutes).  BENCH_INSTR_PROFILE=DIR keeps each
# run's callgrind file and its functions by inclusive cost there.
.PHONY: bench-instructions
bench-instructions: build
	@bash test/scripts/bench_instructions.sh

# Instructions per call of each hot public call (callgrind, a single-user backend, the application
# role bound to its tenant) against the baseline test/bench/calls.tsv: kind, baseline, now, ratio,
# "!" above 1.05 (test/scripts/callgrind_calls.sh, about 5 minutes).  BENCH_CALLS_CHECK=1 exits 1
# when a kind is marked, BENCH_CALLS_UPDATE=1 rewrites the baseline; BENCH_CALLS="KIND ..." runs
# some kinds.
.PHONY: bench-calls
bench-calls: build
	@BENCH_CALLS_BASELINE=test/bench/calls.tsv bash test/scripts/callgrind_calls.sh $(BENCH_CALLS)

# The nested statements (pg_stat_statements, track = all, warm) each public call of the hot paths
# runs, as a Markdown table (test/scripts/bench_statements.sh, about a minute); STATEMENTS_DETAIL=1
# lists the statements too.
.PHONY: bench-statements
bench-statements: build
	@bash test/scripts/bench_statements.sh

# StateBench timelines replayed through cscp on a throwaway cluster, reported per track
# (test/statebench/); not part of `make test`: the data is not part of the project.
#   make statebench STATEBENCH=path/to/train.jsonl
statebench: build
	@bash test/statebench/run.sh "$(STATEBENCH)"

# pg_upgrade of a PostgreSQL 15 cluster holding cscp and data to 17 and to 18 (PG_UPGRADE_TO=17 for
# one), in the Debian roots of `make test PG=…`, then the upgrade suite's checks on the new server
# (test/scripts/pg-upgrade.sh; needs root; minutes per version once the roots exist).
.PHONY: test-pg-upgrade pg-upgrade-in-root
test-pg-upgrade: build
	@bash test/scripts/pg-upgrade.sh $(or $(PG_UPGRADE_TO),17 18)
# Its second half, run by it inside a root (make pg-upgrade-in-root PGVERSION=17).
pg-upgrade-in-root: all
	@$(MAKE) --no-print-directory install
	@bash test/scripts/pg-upgrade-root.sh

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
