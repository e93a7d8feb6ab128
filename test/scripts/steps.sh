#!/usr/bin/env bash
# Quiet steps for `make test`, `make demo`, `make check-assert` and `make valgrind`; sourced, not run.
#
#   steps_init DIR                 logs go to DIR (emptied first)
#   step NAME CMD...               runs CMD with its output in DIR/NAME.log; prints one line:
#                                  the name, ok or FAILED, and the time it took; returns CMD's status
#   steps_parallel N NAME:FN...   the same for several steps, N at a time (in subshells)
#   steps_report WORD              the log of every failed step (or the file it names as its
#                                  detail), then "WORD: N passed, N failed"; returns 1 on a failure
#
# A step may name a more telling file than its log (a pg_regress diff) by writing its path into
# DIR/NAME.detail; steps_report shows that file from its top instead of the log's last lines.

steps_init() {
	STEPS_DIR=$1
	rm -rf "$STEPS_DIR"
	mkdir -p "$STEPS_DIR"
	chmod 777 "$STEPS_DIR"
	STEPS_PASSED=0
	STEPS_FAILED=()
}

step() {
	local name=$1
	shift
	local log="$STEPS_DIR/$name.log" t0=$EPOCHREALTIME rc=0
	"$@" </dev/null >"$log" 2>&1 || rc=$?
	local secs
	secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }')
	if [ $rc -eq 0 ]; then
		STEPS_PASSED=$((STEPS_PASSED + 1))
		printf '  %-34s ok     %7s s\n' "$name" "$secs"
	else
		STEPS_FAILED+=("$name")
		printf '  %-34s FAILED %7s s  (%s)\n' "$name" "$secs" "$log"
	fi
	return $rc
}

# steps_parallel N NAME:FUNCTION...: the steps, N at a time, each in a subshell of its own; each
# prints its line as it ends.
steps_parallel() {
	local jobs=$1 spec name
	shift
	for spec in "$@"; do
		while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do
			wait -n
		done
		name=${spec%%:*}
		(
			rc=0
			step "$name" "${spec#*:}" || rc=$?
			echo $rc >"$STEPS_DIR/$name.rc"
		) &
	done
	wait
	for spec in "$@"; do
		name=${spec%%:*}
		if [ "$(cat "$STEPS_DIR/$name.rc" 2>/dev/null)" = 0 ]; then
			STEPS_PASSED=$((STEPS_PASSED + 1))
		else
			STEPS_FAILED+=("$name")
		fi
	done
}

# The failed steps' details, last, so that a real failure ends the output.
steps_report() {
	local name file lines
	for name in "${STEPS_FAILED[@]}"; do
		echo
		file=$(cat "$STEPS_DIR/$name.detail" 2>/dev/null || true)
		if [ -s "$file" ]; then
			lines=$(wc -l <"$file")
			echo "==== $name FAILED: $file${lines:+ ($lines lines)}"
			head -n 300 "$file"
		else
			file="$STEPS_DIR/$name.log"
			lines=$(wc -l <"$file")
			echo "==== $name FAILED: the last lines of $file ($lines lines)"
			tail -n 120 "$file"
		fi
	done
	echo
	echo "$1: $STEPS_PASSED passed, ${#STEPS_FAILED[@]} failed"
	[ ${#STEPS_FAILED[@]} -eq 0 ]
}
